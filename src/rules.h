/* The decisions of a held slot's life as functions of plain values (no
 * connection, no clock read): how long the broker may be silent, when the
 * command must be signalled, how long a claim may take and still count,
 * whether to offer a lease to the line and whether to adopt one offered.
 * hold.c, take.c, claim.c and handover.c act on them; tests/unit checks
 * them alone. */
#ifndef AMQPLOCK_RULES_H
#define AMQPLOCK_RULES_H

#include <stdbool.h>

/* A held slot is verified, and its lease renewed, this often (seconds). */
#define RULES_VERIFY_INTERVAL 1.0

/* How long the broker may stay silent before a held slot's connection
 * counts as lost, for the heartbeat negotiated (0: none) and the reply
 * deadline: one heartbeat, not under 1.5 verifications; the reply
 * deadline without heartbeats. */
double rules_silence(unsigned heartbeat, double rpc_timeout);

/* On the boot clock: when the command of a hold whose lease (seconds) was
 * last renewed at `renewed` gets SIGKILL unless renewed again (the broker
 * keeps the lease until renewed + lease at the earliest, on its clock,
 * lease_margin less on ours), and --lost-signal, grace before that. */
double rules_kill_deadline(double renewed, double lease);
double rules_signal_deadline(double renewed, double lease, double grace);

/* How long after it was sent a claim may be answered and still count:
 * within the reply timeout, and before the command would get
 * --lost-signal for want of a renewal (lease > 0) or, without a lease,
 * before the silence that tells a lost connection. */
double rules_claim_window(double lease, double grace, unsigned heartbeat, double rpc_timeout);

/* A claim answered `took` seconds after it was sent is void (window 0:
 * any time counts). */
bool rules_claim_void(double took, double window);

/* Whether a holder that is done offers its lease to the first in line
 * rather than releasing the slot: with a lease, with a login the offer
 * can be signed by, not already listening to anything (a consumer of the
 * line), and with its holder queue its own (not so right after a
 * re-attach): the first in line asks through it; never for a slot that
 * drains (removed by a --drain shrink: nobody may take it). (An offer
 * through #waiters, to an older amqplock, is for one slot only:
 * handover.c.) */
bool rules_offer(bool lease, bool login_known, bool listening, bool holder_ours, bool draining);

/* What the first in line holds against adopting an offered lease, or
 * NULL: it must be what it would have made itself (a lease of its own
 * length and type), offered by a holder of its own login, by an amqplock
 * that does not trust offers (an older one names the token). */
const char *rules_not_adoptable(bool lease, bool signed_by_us, bool old, unsigned offered_ms,
				unsigned our_ms, bool offered_quorum, bool our_quorum);

#endif
