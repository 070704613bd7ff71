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
# A minimal AMQP 0-9-1 client in core perl, without heartbeats.
use strict;
use warnings;
use IO::Socket::INET;

my ($port, @args) = @ARGV;
my $exit = grep { $_ eq "--exit" } @args;
@args = grep { $_ ne "--exit" } @args;
my $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $port) or die "connect: $!\n";
sub rd {
    my ($n, $b) = (shift, "");
    while (length $b < $n) { sysread($s, $b, $n - length $b, length $b) or die "eof\n" }
    $b;
}
sub method {
    my ($ch, $c, $m, $args) = @_;
    my $p = pack("n2", $c, $m) . $args;
    syswrite $s, pack("CnN", 1, $ch, length $p) . $p . "\xCE";
}
sub expect {
    my ($c, $m) = @_;
    for (;;) {
        my ($t, $ch, $len) = unpack "CnN", rd(7);
        my $p = rd($len);
        rd(1);
        next if $t != 1;
        my ($gc, $gm) = unpack "n2", $p;
        return $p if $gc == $c && $gm == $m;
        die "expected method $c.$m, got $gc.$gm\n";
    }
}
sub ss { pack "C/a*", shift }
syswrite $s, "AMQP\0\0\x09\x01";
expect(10, 10);                                                   # start
my ($user, $pass, $vhost) = map { $ENV{"HOLDQ_$_->[0]"} // $_->[1] }
    [USER => "guest"], [PASS => "guest"], [VHOST => "/"];
method(0, 10, 11, pack("N", 0) . ss("PLAIN") . pack("N/a*", "\0$user\0$pass") . ss("en_US"));
my (undef, $chmax, $fmax) = unpack "NnN", expect(10, 30);         # tune
method(0, 10, 31, pack("nNn", $chmax, $fmax, 0));                 # tune-ok, no heartbeat
method(0, 10, 40, ss($vhost) . ss("") . "\0");                    # open the vhost
expect(10, 41);
method(1, 20, 10, ss(""));                                        # channel.open
expect(20, 11);
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
