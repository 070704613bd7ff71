#!/usr/bin/perl
# holdq.pl PORT [[MODE] QUEUE...]... [--exit]: declares each QUEUE exclusive
# on one connection of its own to the broker on 127.0.0.1:PORT (guest/guest,
# vhost /, or $HOLDQ_USER, $HOLDQ_PASS and $HOLDQ_VHOST), prints "ready",
# and keeps them until killed: a slot holder that, unlike amqplock, never
# checks its slot, so it stays an orphan after a remove or destroy.
# A MODE word applies to the QUEUEs after it, to damage a semaphore the way
# a foreign client could: --shared declares them durable and not
# exclusive (a stray holder queue or admin mutex that outlives this
# client), --quorum durable quorum queues, --exclusive (the default) as
# above, and --delete deletes them instead. With --exit it closes the
# connection after "ready" instead of keeping it.
# Its AMQP client: Amqp.pm.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use Amqp qw(login method expect ss);

my ($port, @args) = @ARGV;
my $exit = grep { $_ eq "--exit" } @args;
@args = grep { $_ ne "--exit" } @args;
my ($user, $pass, $vhost) = map { $ENV{"HOLDQ_$_->[0]"} // $_->[1] }
    [USER => "guest"], [PASS => "guest"], [VHOST => "/"];
login($port, $user, $pass, $vhost);
# queue.declare: bits 2 durable, 4 exclusive; arguments a field table.
my $quorum = ss("x-queue-type") . "S" . pack("N/a*", "quorum");
my %declare = (
    "--exclusive" => pack("CN", 4, 0),
    "--shared"    => pack("CN", 2, 0),
    "--quorum"    => pack("C", 2) . pack("N/a*", $quorum),
);
my $mode = "--exclusive";
for my $q (@args) {
    if (exists $declare{$q} || $q eq "--delete") { $mode = $q; next }
    if ($mode eq "--delete") {                                    # queue.delete
        method(1, 50, 40, pack("n", 0) . ss($q) . pack("C", 0));
        expect(50, 41);
        next;
    }
    method(1, 50, 10, pack("n", 0) . ss($q) . $declare{$mode});
    expect(50, 11);
}
$| = 1;
print "ready\n";
if ($exit) {                                                      # connection.close
    method(0, 10, 50, pack("n", 200) . ss("bye") . pack("n2", 0, 0));
    expect(10, 51);
    exit 0;
}
sleep 1000 while 1;
