# tests/partition/check.awk: the checker of the partition suite. It reads
# one history, sorted by time (sort -k2,2g), of the lines that
# tests/tools/stamp.c writes:
#
#   start T CLIENT SEM SLOT PID          a job began on SEM's slot SLOT
#   end T CLIENT SEM SLOT PID HOW        it ended (HOW: done, or TERM/INT/HUP
#                                        when its slot was lost)
#   mark T cut|heal|end SCENARIO         the nemesis's steps
#   mark T stop                          the workload was told to stop
#
# and, given -v maxes="SEM=N SEM=N ..." and -v clients="c1 c2 ...", prints
# for each scenario (from its cut to its end mark):
#
#   overlap SCENARIO SEM FROM TO SECS COUNT/MAX CLIENT:SLOT...
#       more than MAX jobs of SEM running from FROM to TO (the jobs then)
#   double SCENARIO SEM SLOT T CLIENT CLIENT
#       a job began on a slot where another one ran
#   blocked SCENARIO SEM SLOT SECS [never]
#       how long the slot stayed empty after the heal: from the heal (or
#       the end of the job on it then) to the next start, in this scenario
#       or a later one (to the end of the history if none: "never")
#   jobs SCENARIO SEM CLIENT N LOST       jobs begun in the scenario, and
#                                         how many of them lost their slot
#   scenario SCENARIO secs=S overlaps=K doubles=D maxrun=SEM:N,...
#       blocked_max=SECS idle=CLIENT/SEM,... jobs_min=N lost=L unended=U
#
# A job with no end line (killed with SIGKILL, or running at the end of the
# history) counts as running until the last line of the history.
function sem_max(s) { return (s in MAX) ? MAX[s] : 1 }
function running_list(s,    p, out) {
    out = ""
    for (p in RUN) if (RSEM[p] == s) out = out " " RCLI[p] ":" RSLOT[p]
    return out
}
function close_overlap(s, t) {
    if (!(s in OVFROM)) return
    printf "overlap %s %s %.3f %.3f %.3f %d/%d%s\n", OVSCEN[s], s, OVFROM[s], t, t - OVFROM[s],
        OVPEAK[s], sem_max(s), OVJOBS[s]
    OVERLAPS[OVSCEN[s]]++
    delete OVFROM[s]
}
function blocked(scen, s, slot, secs, never) {
    printf "blocked %s %s %s %.3f%s\n", scen, s, slot, secs, never ? " never" : ""
    if (secs > BMAX[scen]) BMAX[scen] = secs
}
BEGIN {
    n = split(maxes, kv, " ")
    for (i = 1; i <= n; i++) {
        split(kv[i], pv, "=")
        MAX[pv[1]] = pv[2] + 0
        SEMS[++NSEMS] = pv[1]
    }
    NCLI = split(clients, CLI, " ")
    scen = ""
}
{
    t = $2 + 0
    last = t
}
$1 == "mark" {
    if ($3 == "cut") {
        scen = $4
        ORDER[++NSCEN] = scen
        FROM[scen] = t
        BMAX[scen] = 0
    } else if ($3 == "heal") {
        HEAL[$4] = t
        # every slot of every semaphore is watched from now on
        for (i = 1; i <= NSEMS; i++)
            for (k = 1; k <= MAX[SEMS[i]]; k++) {
                key = SEMS[i] SUBSEP k
                if (key in WATCH || key in WATCH_END) continue  # still empty since an earlier heal
                if (key in BUSY) WATCH_END[key] = $4
                else WATCH[key] = $4 SUBSEP t
            }
    } else if ($3 == "end") {
        TO[$4] = t
        # A slot still empty since the heal stays watched: its time counts
        # for this scenario until it is taken again, in a later one or never.
        scen = ""
    }
    next
}
$1 == "start" {
    cli = $3; s = $4; slot = $5; pid = $6
    key = s SUBSEP slot
    if (key in BUSY && scen != "")
        printf "double %s %s %s %.3f %s %s\n", scen, s, slot, t, BUSY[key], cli
    if (scen != "") DOUBLES[scen] += (key in BUSY)
    BUSY[key] = cli
    RUN[pid] = t; RSEM[pid] = s; RCLI[pid] = cli; RSLOT[pid] = slot
    COUNT[s]++
    if (scen != "") {
        JOBS[scen, s, cli]++
        if (COUNT[s] > MAXRUN[scen, s]) MAXRUN[scen, s] = COUNT[s]
    }
    if (key in WATCH) {
        split(WATCH[key], w, SUBSEP)
        blocked(w[1], s, slot, t - w[2], 0)
        delete WATCH[key]
    }
    if (COUNT[s] > sem_max(s)) {
        if (!(s in OVFROM)) {
            OVFROM[s] = t
            OVSCEN[s] = scen == "" ? "-" : scen
            OVPEAK[s] = 0
        }
        if (COUNT[s] > OVPEAK[s]) {
            OVPEAK[s] = COUNT[s]
            OVJOBS[s] = running_list(s)
        }
    }
    next
}
$1 == "end" {
    pid = $6
    if (!(pid in RUN)) next
    s = RSEM[pid]; slot = RSLOT[pid]
    key = s SUBSEP slot
    if (scen != "" && $7 != "done") LOST[scen, s, RCLI[pid]]++
    delete RUN[pid]
    COUNT[s]--
    if (BUSY[key] == RCLI[pid]) delete BUSY[key]
    if (key in WATCH_END && !(key in BUSY)) {
        WATCH[key] = WATCH_END[key] SUBSEP t
        delete WATCH_END[key]
    }
    if (COUNT[s] <= sem_max(s)) close_overlap(s, t)
    next
}
END {
    for (i = 1; i <= NSEMS; i++) close_overlap(SEMS[i], last)
    for (key in WATCH) {
        split(WATCH[key], w, SUBSEP)
        split(key, sk, SUBSEP)
        blocked(w[1], sk[1], sk[2], last - w[2], 1)
    }
    unended = 0
    for (p in RUN) unended++
    for (j = 1; j <= NSCEN; j++) {
        sc = ORDER[j]
        if (!(sc in TO)) TO[sc] = last
        mr = ""; idle = ""; jmin = -1; lost = 0
        for (i = 1; i <= NSEMS; i++) {
            s = SEMS[i]
            mr = mr (mr == "" ? "" : ",") s ":" (MAXRUN[sc, s] + 0)
            for (c = 1; c <= NCLI; c++) {
                nj = JOBS[sc, s, CLI[c]] + 0
                nl = LOST[sc, s, CLI[c]] + 0
                lost += nl
                printf "jobs %s %s %s %d %d\n", sc, s, CLI[c], nj, nl
                if (nj == 0) idle = idle (idle == "" ? "" : ",") CLI[c] "/" s
                if (jmin < 0 || nj < jmin) jmin = nj
            }
        }
        printf "scenario %s secs=%.1f overlaps=%d doubles=%d maxrun=%s blocked_max=%.1f idle=%s jobs_min=%d lost=%d unended=%d\n",
            sc, TO[sc] - FROM[sc], OVERLAPS[sc] + 0, DOUBLES[sc] + 0, mr, BMAX[sc] + 0,
            idle == "" ? "-" : idle, jmin, lost, j == NSCEN ? unended : 0
    }
}
