/* demo-engine: a tiny stand-in for an LLM serving engine.
 *
 * It answers GET /health and GET /v1/models over HTTP, and at start-up prints the
 * auxiliary hidden-state layers it would tap for a speculative drafter, the way vLLM
 * logs aux_hidden_state_layers. Built from source by the demo image's engine stage.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kernels.h"

#define MAX_LAYERS 8

/* Drafters list target layer ids counting the embeddings as index 0; the engine's
 * tap k means "the state entering layer k". */
static int aux_layer_index(int drafter_layer_id) {
    return drafter_layer_id;
}

static void print_aux_layers(const char *ids) {
    int out[MAX_LAYERS];
    int n = 0;
    char *copy = strdup(ids);
    for (char *tok = strtok(copy, ","); tok && n < MAX_LAYERS; tok = strtok(NULL, ",")) {
        out[n++] = aux_layer_index(atoi(tok));
    }
    free(copy);
    printf("aux_hidden_state_layers=(");
    for (int i = 0; i < n; i++) {
        printf(i ? ", %d" : "%d", out[i]);
    }
    printf(")\n");
}

static void reply(int fd, const char *status, const char *type, const char *body) {
    char head[256];
    int len = snprintf(head, sizeof head,
                       "HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                       status, type, strlen(body));
    if (write(fd, head, (size_t)len) < 0 || write(fd, body, strlen(body)) < 0) {
        perror("write");
    }
}

static void serve(int fd, const char *served_name) {
    char request[2048];
    ssize_t got = read(fd, request, sizeof request - 1);
    if (got <= 0) {
        return;
    }
    request[got] = '\0';
    if (strncmp(request, "GET /health ", 12) == 0) {
        reply(fd, "200 OK", "text/plain", "ok\n");
    } else if (strncmp(request, "GET /v1/models ", 15) == 0) {
        char body[512];
        snprintf(body, sizeof body, "{\"object\":\"list\",\"data\":[{\"id\":\"%s\",\"object\":\"model\"}]}\n",
                 served_name);
        reply(fd, "200 OK", "application/json", body);
    } else {
        reply(fd, "404 Not Found", "text/plain", "not found\n");
    }
}

static void stop(int signum) {
    /* A serving engine is stopped with SIGTERM (docker stop) or SIGINT (Ctrl-C): exit at once. */
    printf("demo-engine: signal %d, stopping\n", signum);
    fflush(stdout);
    _exit(0);
}

int main(int argc, char **argv) {
    const char *model = NULL, *served = NULL, *aux = NULL;
    int port = 8000, dry_run = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--served-model-name")) served = argv[i + 1];
        else if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--aux-layers")) aux = argv[i + 1];
        else if (!strcmp(argv[i], "--dry-run")) dry_run = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "demo-engine: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!model) {
        fprintf(stderr, "demo-engine: --model is required\n");
        return 2;
    }
    if (!served) served = model;
    printf("demo-engine: model %s served as %s on port %d (self-test %lu)\n", model, served, port,
           run_kernels(1));
    if (aux) print_aux_layers(aux);
    fflush(stdout);
    if (dry_run) return 0; /* what it would serve, said; nothing bound */

    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, stop);
    signal(SIGINT, stop);
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port),
                               .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(listener, 16) < 0) {
        perror("demo-engine: bind");
        return 1;
    }
    for (;;) {
        int fd = accept(listener, NULL, NULL);
        if (fd < 0) continue;
        serve(fd, served);
        close(fd);
    }
}
