/* The pure decisions of a held slot's life (rules.h). */
#include <string.h>

#include "clock.h"
#include "rules.h"
#include "tap.h"

int main(void)
{
	ok(rules_silence(0, 30) == 30, "without heartbeats, the reply deadline bounds silence");
	ok(rules_silence(1, 30) == 1.5, "--heartbeat 1: one and a half verifications");
	ok(rules_silence(5, 30) == 5, "--heartbeat 5: one heartbeat");
	ok(rules_kill_deadline(100, 40) == 100 + 40 - lease_margin(40),
	   "SIGKILL comes the lease's margin before the broker may drop the lease");
	ok(rules_signal_deadline(100, 40, 10) == rules_kill_deadline(100, 40) - 10,
	   "--lost-signal comes --grace before SIGKILL");
	ok(rules_claim_window(40, 10, 5, 30) == 27,
	   "a claim counts until its command would be signalled (40 - 3 - 10)");
	ok(rules_claim_window(40, 10, 5, 20) == 20, "and within the reply timeout");
	ok(rules_claim_window(0, 10, 5, 30) == 5,
	   "without a lease, within the silence that tells a lost connection");
	ok(!rules_claim_void(26.9, 27) && rules_claim_void(27.1, 27),
	   "a claim answered after its window is void");
	ok(!rules_claim_void(1e6, 0), "window 0: any answer counts");
	ok(rules_offer(true, true, false, true, false), "a leased holder offers");
	ok(!rules_offer(false, true, false, true, false), "no lease: nothing to offer");
	ok(!rules_offer(true, false, false, true, false), "no login to sign with: a release");
	ok(!rules_offer(true, true, true, true, false), "listening already: a release");
	ok(!rules_offer(true, true, false, false, false),
	   "a holder queue not yet ours again (re-attached): a release");
	ok(!rules_offer(true, true, false, true, true),
	   "a draining holder's slot was removed: a release, never an offer");
	ok(rules_not_adoptable(true, true, false, 40000, 40000, false, false) == NULL,
	   "what we would have made, signed by our login, is adopted");
	ok(strstr(rules_not_adoptable(false, true, false, 40000, 40000, false, false), "lease") !=
		   NULL,
	   "not without a lease of our own");
	ok(strstr(rules_not_adoptable(true, false, false, 40000, 40000, false, false), "signed") !=
		   NULL,
	   "not unsigned by our login");
	ok(strstr(rules_not_adoptable(true, true, true, 40000, 40000, false, false), "older") !=
		   NULL,
	   "not an older amqplock's, which names its token");
	ok(strstr(rules_not_adoptable(true, true, false, 5000, 40000, false, false), "length") !=
		   NULL,
	   "not another length");
	ok(strstr(rules_not_adoptable(true, true, false, 40000, 40000, true, false), "type") !=
		   NULL,
	   "not another type");
	return done_testing();
}
