# The steps of the h200_*.sh scripts, sourced by them: each step runs under
# a timeout within the script's budget, its output in the work folder, its
# status in steps.csv. The sourcing script sets W (work folder), LOG, STEPS
# (with its header written), BUDGET_S and FAILED=0 first.

log() { echo "[$(date -u +%H:%M:%S) ${SECONDS}s] $*" | tee -a "$LOG" >&2; }

# The seconds a step may take: its cap, or what is left of the budget less
# 15 s for the comparisons and the tarball.
allowed() {
    local left=$((BUDGET_S - SECONDS - 15))
    ((left < 1)) && left=1
    ((left < $1)) && echo "$left" || echo "$1"
}

# step NAME CAP_S CMD...: runs CMD (stdout and stderr to NAME.out/.err)
# under a timeout, logs its wall time, records it in steps.csv.
step() {
    local name=$1 cap=$2 rc=0 t0=$SECONDS limit
    shift 2
    limit=$(allowed "$cap")
    log "start $name (timeout ${limit}s): $*"
    timeout --signal=INT --kill-after=10 "$limit" "$@" >"$W/$name.out" 2>"$W/$name.err" || rc=$?
    local took=$((SECONDS - t0)) status=ok
    if ((rc != 0)); then
        status="failed rc=$rc"
        ((rc == 124)) && status="timed out after ${limit}s"
        FAILED=1
        tail -n 5 "$W/$name.err" | sed 's/^/    /' | tee -a "$LOG" >&2
    fi
    log "end   $name: $status, ${took}s"
    echo "$name,$status,$took" >>"$STEPS"
    return "$rc"
}

skip() {
    log "skip  $1: $2"
    echo "$1,skipped ($2),0" >>"$STEPS"
}
