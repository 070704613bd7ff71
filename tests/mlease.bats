#!/usr/bin/env bats
# The lease made of messages designed for issue 43 (model/mlease.pml:
# SAFE, OWN, FREE, LAST), ended, handed over or ended by the keeper of a
# killed amqplock, as SPIN explores it
# (model/run.sh): no violation under an adversary of the holders' own
# login, the hand-over reached, and a counterexample for each known-bad
# variant. Apart from tests/model.bats so that the two suites' longest
# searches run side by side in make check. The search under faults (257
# million states, bitstate, 6 minutes) and BUG_TAKE_BACK_OLD's (a bitstate
# search of 4 minutes) are `make model`'s. Needs no broker; needs spin (make
# deps).

load lib/helper
load lib/model

@test "the lease made of messages (model/mlease.pml, designed for issue 43), handed over or ended, under an adversary of the holders' login (holder queues deleted, messages forged): no second command, no holder's message taken" {
    model mlease-adversary
}

@test "a lease made of messages can be handed over: an adopter's command starts under it (REACH_MADOPT)" {
    model REACH_MADOPT
}

@test "an adopter that counts the ages in its answer from its reading of it, not from its ask (BUG_ADOPT_AGE0), runs its command after its messages ran out: SPIN finds it" {
    model BUG_ADOPT_AGE0
}

@test "a lease of one message queue, renewed by a take and a publish (BUG_ONE_QUEUE), is gone while its command runs once a connection is lost between the two: SPIN finds it" {
    model BUG_ONE_QUEUE
}

@test "a renewal that takes a lease queue while no other is known to hold our message (BUG_TAKE_LAST) lets a claim under way in beside the command: SPIN finds it" {
    model BUG_TAKE_LAST
}

@test "an end of a lease that takes queues not known to hold ours (BUG_TAKE_UNKNOWN) takes the next holder's message: SPIN finds it" {
    model BUG_TAKE_UNKNOWN
}

@test "a keeper whose amqplock is killed takes the messages it was told are ours, as amqplock would end the lease (REACH_LAST_ACT)" {
    model REACH_LAST_ACT
}

@test "a keeper told of a take only once it is answered (BUG_KEEPER_TOLD_LATE), its amqplock killed in between, takes the next holder's message: SPIN finds it" {
    model BUG_KEEPER_TOLD_LATE
}
