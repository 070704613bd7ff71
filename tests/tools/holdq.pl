#!/usr/bin/perl
# holdq.pl PORT QUEUE...: declares each QUEUE exclusive on one connection of
# its own to the broker on 127.0.0.1:PORT (guest/guest, vhost /), prints
# "ready", and keeps them until killed: a slot holder that, unlike amqplock,
# never checks its slot, so it stays an orphan after a remove or destroy.
# A minimal AMQP 0-9-1 client in core perl, without heartbeats.
use strict;
use warnings;
use IO::Socket::INET;

my ($port, @queues) = @ARGV;
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
method(0, 10, 11, pack("N", 0) . ss("PLAIN") . pack("N/a*", "\0guest\0guest") . ss("en_US"));
my (undef, $chmax, $fmax) = unpack "NnN", expect(10, 30);         # tune
method(0, 10, 31, pack("nNn", $chmax, $fmax, 0));                 # tune-ok, no heartbeat
method(0, 10, 40, ss("/") . ss("") . "\0");                       # open vhost /
expect(10, 41);
method(1, 20, 10, ss(""));                                        # channel.open
expect(20, 11);
for my $q (@queues) {                                             # queue.declare exclusive
    method(1, 50, 10, pack("n", 0) . ss($q) . pack("CN", 4, 0));
    expect(50, 11);
}
$| = 1;
print "ready\n";
sleep 1000 while 1;
