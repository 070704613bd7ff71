/* check(cond): what a fuzz target asserts about the code under test. A
 * broken invariant aborts, which libFuzzer reports as a crash with the
 * input that caused it. A target may define CHECK_CONTEXT() before
 * including this, to print more on the way out. */
#ifndef AMQPLOCK_FUZZ_CHECK_H
#define AMQPLOCK_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#ifndef CHECK_CONTEXT
#define CHECK_CONTEXT() ((void)0)
#endif

#define check(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__,       \
				#cond);                                                            \
			CHECK_CONTEXT();                                                           \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#endif
