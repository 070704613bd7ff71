#!/usr/bin/perl
# looker.pl PORT QUEUE [INTERVAL]: someone else looking at a queue. Every
# INTERVAL seconds (default 1) it declares QUEUE passively on its own
# connection to the broker on 127.0.0.1:PORT (guest/guest, vhost /, or
# $HOLDQ_USER, $HOLDQ_PASS and $HOLDQ_VHOST), as a monitoring script that
# reads queue depths does, and prints one line per look: "there", "gone"
# (404) or "refused" (403: the broker wants a permission on the queue). A
# refused or failed look costs the channel; the next look opens another.
# Runs until killed. Its AMQP client: Amqp.pm.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use Amqp qw(login method next_method ss);
use Time::HiRes qw(sleep);

my ($port, $queue, $interval) = @ARGV;
$interval //= 1;
my ($user, $pass, $vhost) = map { $ENV{"HOLDQ_$_->[0]"} // $_->[1] }
    [USER => "guest"], [PASS => "guest"], [VHOST => "/"];
login($port, $user, $pass, $vhost);
$| = 1;
my $channel = 1;
for (;;) {
    # queue.declare, passive (bit 0 of the flags)
    method($channel, 50, 10, pack("n", 0) . ss($queue) . pack("CN", 1, 0));
    my ($c, $m, $args) = next_method();
    if ($c == 50 && $m == 11) {
        print "there\n";
    } elsif ($c == 20 && $m == 40) {                              # channel.close
        my ($code) = unpack "n", $args;
        print $code == 404 ? "gone\n" : "refused\n";
        method($channel, 20, 41, "");                             # close-ok
        $channel++;
        method($channel, 20, 10, ss(""));                         # channel.open
        my ($oc, $om) = next_method();
        die "expected channel.open-ok, got $oc.$om\n" unless $oc == 20 && $om == 11;
    } else {
        die "unexpected method $c.$m\n";
    }
    sleep $interval;
}
