/* Statuses: the first failure wins, context goes in front of it, the
 * exit codes and JSON names stay what the README says, and errno texts
 * name their remedy. */
#include "status.h"
#include "tap.h"

#include <errno.h>

int main(void)
{
	is_str(status_message(), "", "no failure recorded at first");
	ok(fail(AL_CONNECTION, "connection to %s lost", "h:1") == AL_CONNECTION,
	   "fail returns its status");
	fail(AL_BROKER, "a consequence");
	is_str(status_message(), "connection to h:1 lost", "the first failure wins");
	ok(fail_context(AL_LOST, "lost slot %u of %s: ", 1u, "jobs") == AL_LOST,
	   "fail_context returns its status");
	is_str(status_message(), "lost slot 1 of jobs: connection to h:1 lost",
	       "context goes in front of the cause");
	status_clear();
	is_str(status_message(), "", "status_clear forgets it");
	fail_context(AL_BUSY, "timed out: ");
	is_str(status_message(), "timed out: ", "context without a cause is the context");
	status_clear();
	fail(AL_INTERNAL, "the cause");
	fail(AL_CONNECTION, "a cleanup's failure");
	status_clear_unless(true);
	is_str(status_message(), "the cause", "a cleanup after a failure leaves its cause");
	status_clear();
	fail(AL_CONNECTION, "a cleanup's failure");
	status_clear_unless(false);
	is_str(status_message(), "", "a cleanup with no failure before clears its own");
	ok(status_exit_code(AL_OK) == 0 && status_exit_code(AL_BUSY) == 1,
	   "ok is 0 and busy 1, as with flock");
	ok(status_exit_code(AL_USAGE) == 64 && status_exit_code(AL_DAMAGED) == 65 &&
		   status_exit_code(AL_NOT_FOUND) == 66 && status_exit_code(AL_CONNECTION) == 69 &&
		   status_exit_code(AL_INTERNAL) == 70 && status_exit_code(AL_EXISTS) == 73 &&
		   status_exit_code(AL_LOST) == 75 && status_exit_code(AL_BROKER) == 76 &&
		   status_exit_code(AL_ACCESS) == 77,
	   "amqplock's own failures take sysexits codes");
	ok(status_exit_code((enum al_status)42) == 70, "an unknown status is internal (70)");
	is_str(status_name(AL_INTERNAL), "internal", "and are named internal");
	is_str(status_name(AL_BROKER), "broker", "broker failures are named broker");
	is_str(status_name(AL_NOT_FOUND), "not_found", "not found is not_found");
	is_str(status_name((enum al_status)42), "internal", "an unknown status is internal");
	is_str(status_strerror(EMFILE), "Too many open files (raise ulimit -n)",
	       "too many open files says to raise ulimit -n");
	is_str(status_strerror(ENOENT), "No such file or directory", "other errors as strerror");
	return done_testing();
}
