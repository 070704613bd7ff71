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
	{
		struct deadline never = deadline_never(), d = deadline_in(-1);

		ok(deadline_is_never(never) && deadline_is_never(d),
		   "a negative wait is no deadline");
		ok(!deadline_passed(never), "never never passes");
		ok(poll_ms(deadline_left(never)) == 3600000, "never polls an hour at a time");
		ok(deadline_is_never(deadline_graced(never, 0.5)), "never, with a grace, is never");
		ok(deadline_left(deadline_within(deadline_graced(never, 0.5), 2)) <= 2,
		   "and a step within it gets its own length");
		d = deadline_within(never, 2);
		ok(!deadline_is_never(d) && deadline_left(d) > 1.9 && deadline_left(d) <= 2,
		   "a step within no deadline gets its own length");
	}
	{
		struct deadline d = deadline_in(0);

		ok(deadline_passed(d) && deadline_left(d) == 0, "a wait of 0 has passed at once");
		d = deadline_in(1);
		ok(!deadline_passed(d) && deadline_left(d) > 0.9,
		   "a second from now has not passed");
		ok(deadline_left(deadline_within(d, 10)) <= 1,
		   "a step within a deadline ends by it");
		ok(deadline_left(deadline_within(d, 0.1)) <= 0.1,
		   "or sooner, if the step is shorter");
	}
	{
		/* -w's end with the last try's grace (cmd_client.c). */
		struct deadline d = deadline_graced(deadline_in(1), 0.5);

		ok(deadline_left(deadline_within(d, 10)) <= 1,
		   "a step begun long before a graced deadline still ends by it");
		d = deadline_graced(deadline_in(0.2), 0.5);
		ok(deadline_left(deadline_within(d, 10)) > 0.45 &&
			   deadline_left(deadline_within(d, 10)) <= 0.5,
		   "one begun within the grace before it gets the grace from its start");
		ok(deadline_left(deadline_within(d, 0.1)) <= 0.1,
		   "or less, if the step is shorter");
		d = deadline_graced(deadline_in(0), 0.5);
		ok(deadline_passed(d) && deadline_left(deadline_within(d, 10)) > 0.45,
		   "the last try, begun at the end, gets the grace (the end has passed)");
		d = deadline_graced((struct deadline){.at = now_seconds() - 0.3}, 0.5);
		ok(deadline_left(deadline_within(d, 10)) <= 0.2,
		   "and no step runs past the end and its grace");
	}
	{
		struct backoff b = backoff_start(0.01, 0.5);
		struct deadline never = deadline_never();
		double p, longest = 0;
		int i, in_range = 1;

		for (i = 0; i < 20; i++) {
			double base = i < 6 ? 0.01 * (1 << i) : 0.5;

			if (base > 0.5)
				base = 0.5;
			p = backoff_next(&b, never);
			in_range &= p >= base / 2 && p < base * 1.5;
			longest = p > longest ? p : longest;
		}
		ok(in_range, "pauses double from the first, jittered by half either way");
		ok(longest < 0.75, "and stay under the longest plus half");
		b = backoff_start(1, 1);
		ok(backoff_next(&b, deadline_in(0.05)) <= 0.05,
		   "a pause never runs past the deadline");
		ok(backoff_next(&b, deadline_in(0)) == 0, "and is nothing once it has passed");
	}
	{
		char t[32], small[8];

		utc_text(1796075401, t, sizeof(t));
		is_str(t, "2026-11-30T21:50:01Z", "a wall-clock time as amqplock shows it (UTC)");
		utc_text(0, small, sizeof(small));
		is_str(small, "", "too small a buffer: nothing, not half a time");
	}
	return done_testing();
}
