#!/usr/bin/env bats
# The holder's protocol as a model (model/hold.pml) that SPIN explores in
# full (model/run.sh): no violation of SAFE, FREE or SERVED under an
# adversary of the holders' own login, nor of SAFE, FREE and EVICTED under
# an administrator's eviction, and a counterexample for each
# known-bad variant, or the model has lost its teeth. The same for the
# line designed for hand-overs at every slot count (model/line.pml: SAFE,
# KEPT, SERVED, ORDER), with the runs it must reach. The lease made of
# messages (model/mlease.pml) is tests/mlease.bats's: a suite of its own,
# so that the two longest searches run side by side in make check. The
# searches under faults alone (35 and 21 million states, minutes of a
# core) are `make model`'s: in make check they would make the whole run
# minutes longer. Needs no broker; needs spin (make deps).

load lib/helper
load lib/model

@test "the protocol under an adversary of the holders' login (forged offers and answers, replays, notes taken, queues deleted, the slot removed): no violation" {
    model adversary
}

@test "an administrator's eviction (amqplock evict): no second command, and the slot comes back only once the evicted job has ended (under kills and stops too: make model's evict-faults)" {
    model evict
}

@test "an eviction that frees the slot at once (BUG_EVICT_FREES) gives it back while the evicted command runs: SPIN finds it" {
    model BUG_EVICT_FREES
}

@test "a --drain shrink (max N --drain, src/drain.c): the drained holder runs on, and no other command starts on its removed slot until the slot is made again" {
    model drain
}

@test "a claim that takes the drain marker for the slot queue (BUG_DRAIN_ADMITS) starts a command on a drained slot: SPIN finds it" {
    model BUG_DRAIN_ADMITS
}

@test "fencing tokens drawn once a claim or adoption is granted grow with every grant (the design for issue 44)" {
    model token
}

@test "a token drawn when the claim is sent (BUG_TOKEN_EARLY) can be smaller than an earlier grant's: SPIN finds it" {
    model BUG_TOKEN_EARLY
}

@test "a waiter that takes an offer for the lease (BUG_ADOPT_OFFER) runs beside the holder: SPIN finds it" {
    model BUG_ADOPT_OFFER
}

@test "a keeper whose deadline falls after the lease's (BUG_KEEPER_LATE) lets two commands run: SPIN finds it" {
    model BUG_KEEPER_LATE
}

@test "a claim answered late and kept (BUG_LATE_CLAIM) runs beside the next holder: SPIN finds it" {
    model BUG_LATE_CLAIM
}

@test "an offerer that ends the lease after its answer (BUG_OFFERER_ENDS_LEASE) lets two commands run: SPIN finds it" {
    model BUG_OFFERER_ENDS_LEASE
}

@test "a release that wakes nobody (BUG_NO_WAKE) leaves a free slot while someone waits: SPIN finds it" {
    model BUG_NO_WAKE
}

@test "an asker that takes any answer for its offer (BUG_ANY_ANSWER) runs beside an away holder: SPIN finds it" {
    model BUG_ANY_ANSWER
}

@test "the line for N slots under kills and an adversary of the holders' login: no two commands on a slot, no place lost, served in arrival order" {
    model line-both
}

@test "a line read with auto-ack (BUG_ACK_AT_GET) loses a waiter's place when its releaser dies: SPIN finds it" {
    model BUG_ACK_AT_GET
}

@test "a releaser that stops at a gone waiter's entry (BUG_SINGLE_OFFER) leaves a slot free while others wait: SPIN finds it" {
    model BUG_SINGLE_OFFER
}

@test "a wake that acknowledges the entry (BUG_WAKE_ACKS) loses the woken waiter's place: SPIN finds it" {
    model BUG_WAKE_ACKS
}

@test "a newcomer that takes a free slot without counting the line (BUG_SKIP_COUNT) passes a waiter: SPIN finds it" {
    model BUG_SKIP_COUNT
}

# (a gone entry, a wake and a newcomer beside a free slot are reached by
# the variants' counterexamples above: each variant changes only that)
@test "the line model reaches hand-overs, two at once, and adoptions" {
    local p
    for p in REACH_HANDOVER REACH_TWO_AT_ONCE REACH_ADOPTED; do
        model "$p"
    done
}
