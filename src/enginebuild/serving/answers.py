"""The deployment lock's prompts, sent to the engine once it answers, and their answers compared.

Each prompt goes to the head's OpenAI-style `/v1/completions` on its PORT (vLLM's and
llama-server's), asked inside the head's container (the engine may listen on the container's
loopback only), greedy (temperature 0) for its `max_tokens`; the text the engine returns is the
answer. A start is ready only when every answer is the lock's. An engine started with an API
key (VLLM_API_KEY, LLAMA_ARG_API_KEY, passed to the container by name) is asked with it, read
from the container's own environment: the key never leaves the node.
"""

from __future__ import annotations

from dataclasses import dataclass

from enginebuild.errors import EngineBuildError, shown_line
from enginebuild.serving import driver
from enginebuild.serving.deployment import Answer
from enginebuild.serving.driver import Reached, ServeFailed
from enginebuild.wire import loads

ASK = ("import json, os, sys, urllib.request\n"
       "base = 'http://127.0.0.1:' + os.environ.get('PORT', '8000')\n"
       "body = {'prompt': sys.argv[1], 'max_tokens': int(sys.argv[2]), 'temperature': 0, 'seed': 0}\n"
       "key = os.environ.get('VLLM_API_KEY') or os.environ.get('LLAMA_ARG_API_KEY')\n"
       "auth = {'Authorization': 'Bearer ' + key} if key else {}\n"
       "try:\n"
       "    listed = json.load(urllib.request.urlopen(urllib.request.Request(base + '/v1/models', headers=auth),\n"
       "                                              timeout=60))\n"
       "    body['model'] = listed['data'][0]['id']\n"
       "except Exception:\n"
       "    pass\n"
       "request = urllib.request.Request(base + '/v1/completions', data=json.dumps(body).encode(),\n"
       "                                 headers={'Content-Type': 'application/json', **auth})\n"
       "try:\n"
       "    answer = json.load(urllib.request.urlopen(request, timeout=float(sys.argv[3])))\n"
       "    print(json.dumps({'text': answer['choices'][0]['text']}))\n"
       "except Exception as exc:\n"
       "    print(json.dumps({'error': str(exc)[:500]}))\n")
LIMIT_S = 600  # one answer


@dataclass(frozen=True)
class Asked:
    answer: Answer
    got: str

    @property
    def matches(self) -> bool:
        return self.got == self.answer.expected


def ask(head: Reached, ident: str, prompt: str, max_tokens: int) -> str:
    """The engine's greedy answer to `prompt`, asked in the head's container."""
    try:
        status, said = driver.exec_in(head.engine, ident, ["python3", "-c", ASK, prompt, str(max_tokens),
                                                           str(LIMIT_S)], LIMIT_S + 30)
    except EngineBuildError as exc:
        raise ServeFailed([f"{head.node.name}: asking the engine: {exc.message}"]) from None
    for line in reversed(said.splitlines()):
        if line.startswith("{"):
            try:
                doc = loads(line)
            except ValueError:
                break
            if isinstance(doc, dict) and isinstance(doc.get("text"), str):
                return str(doc["text"])
            if isinstance(doc, dict) and "error" in doc:
                raise ServeFailed([f"{head.node.name}: the engine did not answer the prompt {_shown(prompt)}: "
                                   f"{shown_line(str(doc['error']))}"])
            break
    raise ServeFailed([f"{head.node.name}: no answer to the prompt {_shown(prompt)} (exit {status}): "
                       f"{shown_line(said.strip()[-300:]) or 'no output'}"])


def asked(head: Reached, ident: str, answers: tuple[Answer, ...]) -> list[Asked]:
    return [Asked(a, ask(head, ident, a.prompt, a.max_tokens)) for a in answers]


def mismatches(results: list[Asked]) -> list[str]:
    """One line per answer that is not the lock's: the prompt, what was expected, what came."""
    return [f"answer {i} differs: prompt {_shown(r.answer.prompt)}: expected {_shown(r.answer.expected)}, "
            f"got {_shown(r.got)}" for i, r in enumerate(results, 1) if not r.matches]


def _shown(text: str) -> str:
    return shown_line(repr(text), 200)
