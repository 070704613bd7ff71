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
	return done_testing();
}
