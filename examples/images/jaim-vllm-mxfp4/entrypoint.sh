#!/bin/sh
# Says which GPU the container sees, then runs the command (the recipe's validation entrypoint,
# written here in our own words).
set -e
python3 -c "import torch; c = torch.cuda.get_device_capability(); print(torch.cuda.get_device_name(0), f'sm_{c[0]}{c[1]}')" \
    || echo "no GPU visible" >&2
exec "$@"
