#!/bin/sh
# keepalived notify script for a monolock pair.
#
# keepalived calls it with: TYPE NAME STATE PRIORITY, STATE being MASTER,
# BACKUP, FAULT or STOP. When this host stops being MASTER it fences itself:
# it kills monolock (SIGKILL) and stops the unit, so the old primary grants
# nothing more while clients reconnect to the new one, and its check then
# fails, so it cannot take the address back by itself. An operator brings it
# back as the standby with `systemctl start monolock` once the cause is
# understood.
#
# Why SIGKILL and not a graceful stop: a fence must act at once and on any
# process. SIGTERM waits for -shutdown-delay, during which the old primary
# could still grant (to waiters whose holders' leases run out) with tokens
# above the new primary's first one; and a frozen process (SIGSTOP, a stuck
# VM) only acts on SIGTERM when it thaws, after catching up on its timers.
# SIGKILL takes effect even on a stopped process. The cost is the audit
# events still buffered (a few milliseconds' worth) and ERROR 0x01 for
# sessions that, with the address gone, cannot receive it anyway.
#
# A host that was not MASTER (a standby entering BACKUP at start) is left
# alone: its idle monolock is what makes it ready to take over.
#
# MONOLOCK_VRRP_STATE_DIR (default /run/monolock-vrrp) holds the last state;
# SYSTEMCTL (default systemctl) is the command that starts, kills and stops
# the service (a test harness without systemd puts its own there).
set -u
state=${3:-}
dir=${MONOLOCK_VRRP_STATE_DIR:-/run/monolock-vrrp}
systemctl=${SYSTEMCTL:-systemctl}

mkdir -p "$dir"
previous=$(cat "$dir/state" 2>/dev/null || echo NONE)
echo "$state" > "$dir/state"
logger -t monolock-vrrp "state $previous -> $state" 2>/dev/null || true

case "$state" in
MASTER)
    # Clients reconnect here; make sure the server runs (it normally does).
    $systemctl start monolock.service
    ;;
BACKUP|FAULT|STOP)
    if [ "$previous" = MASTER ]; then
        logger -t monolock-vrrp "was MASTER: killing monolock to fence this host" 2>/dev/null || true
        $systemctl kill --signal=SIGKILL monolock.service
        # Stopping the unit keeps Restart=on-failure from bringing it back.
        $systemctl stop monolock.service
    fi
    ;;
*)
    echo "notify_monolock.sh: unknown state '$state'" >&2
    exit 2
    ;;
esac
