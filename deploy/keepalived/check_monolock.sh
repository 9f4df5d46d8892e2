#!/bin/sh
# keepalived vrrp_script: healthy when monolock's /readyz answers 200.
# /readyz answers 503 from the moment the server begins shutting down, and
# nothing answers when it is stopped; either makes this host give up (or not
# take) the virtual address. With -shutdown-delay, a stopping server keeps
# serving while this check fails and the address moves, so its clients are
# told to reconnect only once the address leads to the other host.
# MONOLOCK_OPS_ADDRESS overrides the ops address.
exec curl --silent --fail --output /dev/null --max-time 1 \
    "http://${MONOLOCK_OPS_ADDRESS:-127.0.0.1:9090}/readyz"
