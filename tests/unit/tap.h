/* A few lines of TAP for the C unit tests: each check prints "ok N - ..."
 * or "not ok N - ...", done_testing() prints the plan and gives the exit
 * status. tests/run.sh counts these lines. */
#ifndef AMQPLOCK_TAP_H
#define AMQPLOCK_TAP_H

#include <stdio.h>
#include <string.h>

static int tap_run, tap_failed;

#define ok(cond, ...)                                                                              \
	do {                                                                                       \
		int ok_ = (cond);                                                                  \
		tap_run++;                                                                         \
		if (!ok_)                                                                          \
			tap_failed++;                                                              \
		printf("%sok %d - ", ok_ ? "" : "not ", tap_run);                                  \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
		if (!ok_)                                                                          \
			printf("#   failed at %s:%d\n", __FILE__, __LINE__);                       \
	} while (0)

#define is_str(got, want, ...)                                                                     \
	do {                                                                                       \
		const char *got_ = (got), *want_ = (want);                                         \
		ok(got_ &&want_ ? strcmp(got_, want_) == 0 : got_ == want_, __VA_ARGS__);          \
		if (!(got_ && want_ ? strcmp(got_, want_) == 0 : got_ == want_))                   \
			printf("#   got \"%s\", want \"%s\"\n", got_ ? got_ : "(null)",            \
			       want_ ? want_ : "(null)");                                          \
	} while (0)

static int done_testing(void)
{
	printf("1..%d\n", tap_run);
	return tap_failed ? 1 : 0;
}

#endif
