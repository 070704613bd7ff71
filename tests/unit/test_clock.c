/* Time arithmetic: poll(2) timeouts and the earlier of two times. */
#include "clock.h"
#include "tap.h"

int main(void)
{
	ok(poll_ms(0) == 0, "no time left is a 0 ms poll");
	ok(poll_ms(-1.5) == 0, "a deadline already past is a 0 ms poll");
	ok(poll_ms(0.0000001) == 1, "a sliver of a millisecond rounds up to 1");
	ok(poll_ms(0.25) == 250, "0.25 s is 250 ms");
	ok(poll_ms(0.2501) == 251, "0.2501 s rounds up to 251 ms");
	ok(poll_ms(2) == 2000, "2 s is 2000 ms");
	ok(poll_ms(1e12) == 3600000, "a wait longer than an hour is cut to an hour");
	ok(poll_ms(1.0 / 0.0) == 3600000, "no deadline is an hour at a time");
	ok(sooner(1, 2) == 1 && sooner(2, 1) == 1, "sooner takes the earlier time");
	ok(sooner(-1, 1.0 / 0.0) == -1, "anything is sooner than never");
	ok(lease_margin(0) == 1.0, "a lease's margin is a second at least");
	ok(lease_margin(40) == 3.0, "and 5%% of the lease on top");
	ok(lease_shortest(10, 5) > 17.89 && lease_shortest(10, 5) < 17.9,
	   "--grace 10 --heartbeat 5 needs a lease of 17.9 s");
	ok(40 - lease_margin(40) - 10 >= 5 + 1 + 10, "the default lease rides out a 10 s outage");
	{
		double d = lease_shortest(3, 2);

		ok(d - lease_margin(d) - 3 >= 2 + 1 - 1e-9,
		   "the shortest lease leaves a second between silence and signal");
	}
	return done_testing();
}
