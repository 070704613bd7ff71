#!/usr/bin/env bats
# The holder's protocol as a model (model/hold.pml) that SPIN explores in
# full (model/run.sh): no violation of SAFE, FREE or SERVED under an
# adversary of the holders' own login, and a counterexample for each
# known-bad variant, or the model has lost its teeth. The search under
# faults (35 million states, two minutes of a core) is `make model`'s:
# in make check it made the whole run two minutes longer. Needs no
# broker; needs spin (make deps).

load lib/helper

# model NAME: model/run.sh NAME, its TAP line noted
model() {
    run "$TOP/model/run.sh" "$1"
    echo "$output"
    note "$(grep -m1 -E '^(not )?ok ' <<<"$output" | sed -E 's/^(not )?ok [0-9]+ - //')"
    [ "$status" -eq 0 ]
}

@test "the protocol under an adversary of the holders' login (forged offers and answers, replays, notes taken, queues deleted, the slot removed): no violation" {
    model adversary
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
