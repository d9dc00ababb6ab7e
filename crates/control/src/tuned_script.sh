#!/bin/sh
# Written by `irqlab control export` from @SOURCE@; export again rather
# than edit it.
#
# The profile's IRQ affinities, which tuned @TUNED@ has no plugin for. IRQ
# numbers differ from boot to boot, so each IRQ is found by its name each
# time tuned starts the profile. tuned runs this with `start`, `stop`
# (`full_rollback` may follow) and `verify` (`ignore_missing` may follow);
# anything on stderr, and a status other than 0, is an error in tuned's
# log. `stop` puts back what `start` changed, saved under the state
# directory: it is in /run because an IRQ number saved in one boot means
# nothing in the next.

set -u

# Other roots only for irqlab's own tests of this script.
proc=${IRQLAB_TUNED_PROC:-/proc}
sys=${IRQLAB_TUNED_SYS:-/sys}
state=${IRQLAB_TUNED_STATE:-@STATE@}
# irqbalance's environment file (Debian's unit passes its IRQBALANCE_ARGS;
# tuned's [irqbalance] plugin writes its banned CPUs there too), and the
# command that restarts a running irqbalance.
irqbalance_env=${IRQLAB_TUNED_IRQBALANCE_ENV:-/etc/default/irqbalance}
systemctl=${IRQLAB_TUNED_SYSTEMCTL:-systemctl}
ban_mark='# irqlab-tuned: the IRQs this profile sets, left alone by irqbalance (the next line; removed at stop)'

# The default IRQ affinity (/proc/irq/default_smp_affinity, where IRQs
# registered later start), a hex mask as the kernel takes it; empty: the
# profile sets none.
default_mask='@DEFAULT_MASK@'

# The IRQ settings in the profile's order: `want SPEC CPUS`. A later one
# decides for an IRQ an earlier one also named, as in `irqlab control
# apply`.
wanted() {
@WANTED@
}

# Whether handler name $1 carries name $2: $2 itself, or $2 and a
# separator (virtio2-input.0 for virtio2, as `irqlab control irq` takes it).
carries() {
    case $1 in
        "$2" | "$2"-* | "$2":* | "$2"@*) return 0 ;;
    esac
    return 1
}

# The IRQs a name takes: those whose handler carries it, and for a network
# device those of its bus device (its MSI vectors, a virtio device's on its
# PCI parent, and the handlers named after the bus device).
named() {
    bus=
    if dev=$(readlink -f "$sys/class/net/$1/device" 2>/dev/null) && [ -d "$dev" ]; then
        bus=${dev##*/}
        for m in "$dev"/msi_irqs/* "$dev"/../msi_irqs/*; do
            [ -e "$m" ] && echo "${m##*/}"
        done
    fi
    for d in "$sys"/kernel/irq/[0-9]*; do
        [ -r "$d/actions" ] || continue
        tr ',' '\n' <"$d/actions" | while IFS= read -r action; do
            if carries "$action" "$1" || { [ -n "$bus" ] && carries "$action" "$bus"; }; then
                echo "${d##*/}"
                break
            fi
        done
    done
}

# The numbers of the IRQs SPEC takes now: a number, every numbered IRQ
# ('*'), or a name.
irqs_of() {
    case $1 in
        '*')
            for d in "$proc"/irq/[0-9]*; do
                [ -d "$d" ] && echo "${d##*/}"
            done
            ;;
        *[!0-9]*) named "$1" | sort -un ;;
        *) if [ -d "$proc/irq/$1" ]; then echo "$1"; fi ;;
    esac
}

# want SPEC CPUS: each IRQ SPEC takes now is to be on CPUS, one file per
# IRQ in $plan (an IRQ taken by '*' also gets N.wildcard: the kernel may
# keep it where it is, as it keeps per-CPU IRQs).
want() {
    found=
    for n in $(irqs_of "$1"); do
        found=1
        echo "$2" >"$plan/$n"
        if [ "$1" = '*' ]; then : >"$plan/$n.wildcard"; else rm -f "$plan/$n.wildcard"; fi
    done
    if [ -z "$found" ] && [ "$1" != '*' ]; then
        echo "no IRQ is named $1 now" >>"$plan/missing"
    fi
}

# Writes $1 to file $2; the shell's own complaint is left out, the caller
# says what failed.
set_to() {
    { printf '%s\n' "$1" >"$2"; } 2>/dev/null
}

# A CPU list as its CPUs, one word each (0-2,5 -> 0 1 2 5).
cpu_words() {
    printf '%s\n' "$1" | awk -F, '{
        for (i = 1; i <= NF; i++) {
            n = split($i, r, "-")
            if (n == 2) { for (c = r[1]; c <= r[2]; c++) printf "%d ", c }
            else if ($i != "") printf "%d ", $i
        }
    }'
}

# A hex mask without its commas and leading zeros (00000000,00000003 -> 3).
mask_digits() {
    digits=$(printf '%s\n' "$1" | tr -d ',' | tr 'A-F' 'a-f' | sed 's/^0*//')
    echo "${digits:-0}"
}

# The IRQ files of a plan, by number.
irq_files() {
    for f in "$1"/*; do
        case ${f##*/} in
            *[!0-9]* | '') ;;
            *) echo "$f" ;;
        esac
    done
}

# irqbalance moves every IRQ it is not told to leave alone, the ones this
# profile sets included (tuned 2.20's [irqbalance] bans CPUs, not IRQs):
# each becomes a --banirq in IRQBALANCE_ARGS, after the user's own
# arguments, on a marked line of irqbalance's environment file. Status 1
# when there is no such file or nothing to ban.
ban_irqs() {
    [ -f "$irqbalance_env" ] && [ $# -gt 0 ] || return 1
    unban_irqs
    own=$(sed -n 's/^IRQBALANCE_ARGS=//p' "$irqbalance_env" | tail -n 1 | sed 's/^"\(.*\)"$/\1/')
    bans=$(for n in "$@"; do printf ' --banirq=%s' "$n"; done)
    printf '%s\nIRQBALANCE_ARGS="%s"\n' "$ban_mark" "${own# }${bans}" >>"$irqbalance_env"
}

# The marked line out of irqbalance's environment file; status 1 when
# there was none.
unban_irqs() {
    [ -f "$irqbalance_env" ] && grep -qxF "$ban_mark" "$irqbalance_env" || return 1
    awk -v mark="$ban_mark" 'skip { skip = 0; next } $0 == mark { skip = 1; next } { print }' "$irqbalance_env" \
        >"$irqbalance_env.irqlab" && mv "$irqbalance_env.irqlab" "$irqbalance_env"
}

# A running irqbalance reads its arguments again (one that is not running
# stays so).
restart_irqbalance() {
    "$systemctl" try-restart irqbalance.service >/dev/null 2>&1 || true
}

start() {
    mkdir -p "$state/old" || return 1
    rm -rf "$state/want"
    mkdir "$state/want" || return 1
    plan=$state/want
    wanted
    status=0
    # Banned before they are set: irqbalance would move them back.
    # shellcheck disable=SC2046 # one IRQ number per word
    if ban_irqs $(irq_files "$plan" | sed 's|.*/||'); then restart_irqbalance; fi
    if [ -n "$default_mask" ]; then
        was=$(cat "$proc/irq/default_smp_affinity") || return 1
        if set_to "$default_mask" "$proc/irq/default_smp_affinity"; then
            # A start after a start without a stop keeps the first value.
            [ -f "$state/default.old" ] || echo "$was" >"$state/default.old"
        else
            echo "the default IRQ affinity: writing $default_mask failed" >&2
            status=1
        fi
    fi
    for f in $(irq_files "$plan"); do
        n=${f##*/}
        cpus=$(cat "$f")
        was=$(cat "$proc/irq/$n/smp_affinity_list" 2>/dev/null) || continue
        if set_to "$cpus" "$proc/irq/$n/smp_affinity_list"; then
            [ -f "$state/old/$n" ] || echo "$was" >"$state/old/$n"
        elif [ -f "$plan/$n.wildcard" ]; then
            : >"$plan/$n.kept"
        else
            echo "IRQ $n: the kernel keeps it on CPUs $was (CPUs $cpus refused)" >&2
            status=1
        fi
    done
    if [ -f "$plan/missing" ]; then
        cat "$plan/missing" >&2
        status=1
    fi
    return $status
}

stop() {
    if unban_irqs; then restart_irqbalance; fi
    [ -d "$state" ] || return 0
    status=0
    for f in $(irq_files "$state/old"); do
        n=${f##*/}
        # Gone with its device since start: nothing to put back.
        [ -d "$proc/irq/$n" ] || continue
        if ! set_to "$(cat "$f")" "$proc/irq/$n/smp_affinity_list"; then
            echo "IRQ $n: putting back CPUs $(cat "$f") failed" >&2
            status=1
        fi
    done
    if [ -f "$state/default.old" ] && ! set_to "$(cat "$state/default.old")" "$proc/irq/default_smp_affinity"; then
        echo "the default IRQ affinity: putting back $(cat "$state/default.old") failed" >&2
        status=1
    fi
    rm -rf "$state"
    return $status
}

# The machine now against the profile (resolved again: an IRQ that came
# since is held to it too). An IRQ the kernel kept where it was at start,
# under '*', is no failure.
verify() {
    plan=$(mktemp -d) || return 1
    wanted
    status=0
    if [ -n "$default_mask" ]; then
        now=$(cat "$proc/irq/default_smp_affinity")
        if [ "$(mask_digits "$now")" != "$(mask_digits "$default_mask")" ]; then
            echo "the default IRQ affinity is $now, the profile sets $default_mask" >&2
            status=1
        fi
    fi
    for f in $(irq_files "$plan"); do
        n=${f##*/}
        cpus=$(cat "$f")
        now=$(cat "$proc/irq/$n/smp_affinity_list" 2>/dev/null) || continue
        [ "$(cpu_words "$now")" = "$(cpu_words "$cpus")" ] && continue
        [ -f "$plan/$n.wildcard" ] && [ -f "$state/want/$n.kept" ] && continue
        echo "IRQ $n is on CPUs $now, the profile sets CPUs $cpus" >&2
        status=1
    done
    if [ -f "$plan/missing" ] && [ "$1" != ignore_missing ]; then
        cat "$plan/missing" >&2
        status=1
    fi
    rm -rf "$plan"
    return $status
}

case ${1:-} in
    start) start ;;
    stop) stop ;;
    verify) verify "${2:-}" ;;
    *)
        echo "usage: $0 start|stop [full_rollback]|verify [ignore_missing]" >&2
        exit 2
        ;;
esac
