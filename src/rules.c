/* The pure decisions of a held slot's life (rules.h). */
#include "rules.h"

#include <stddef.h>

#include "clock.h"

double rules_silence(unsigned heartbeat, double rpc_timeout)
{
	/* Not under 1.5 s: with the check every second, a reply a little
	 * late would otherwise count as silence at --heartbeat 1. */
	double least = 1.5 * RULES_VERIFY_INTERVAL;

	if (!heartbeat)
		return rpc_timeout;
	return heartbeat < least ? least : (double)heartbeat;
}

double rules_kill_deadline(double renewed, double lease)
{
	return renewed + lease - lease_margin(lease);
}

double rules_signal_deadline(double renewed, double lease, double grace)
{
	return rules_kill_deadline(renewed, lease) - grace;
}

double rules_claim_window(double lease, double grace, unsigned heartbeat, double rpc_timeout)
{
	double bound = lease > 0 ? lease - lease_margin(lease) - grace
				 : rules_silence(heartbeat, rpc_timeout);

	return sooner(bound, rpc_timeout);
}

bool rules_claim_void(double took, double window)
{
	return window > 0 && took > window;
}

bool rules_offer(bool lease, bool login_known, bool listening, bool holder_ours, bool draining)
{
	return lease && login_known && !listening && holder_ours && !draining;
}

const char *rules_not_adoptable(bool lease, bool signed_by_us, bool old, unsigned offered_ms,
				unsigned our_ms, bool offered_quorum, bool our_quorum)
{
	if (!lease)
		return "we hold without a lease";
	if (!signed_by_us)
		return "it is not signed by our login";
	if (old)
		return "it is an older amqplock's, which trusts its offers";
	if (offered_ms != our_ms)
		return "its length is not our --lease";
	if (offered_quorum != our_quorum)
		return "its type is not the one we would make";
	return NULL;
}
