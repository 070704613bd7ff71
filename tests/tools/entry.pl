#!/usr/bin/perl
# entry.pl PORT USER PASS LINE NAMED: an entry forged into LINE (a
# semaphore's #line) on the broker at 127.0.0.1:PORT as USER: type
# amqplock.entry, its header "queue" saying NAMED, as a waiter's entry
# names its own queue (docs/design.md, "A line for N slots"). Publishes it
# with a confirm and exits 0 once the broker has taken it.
# Its AMQP client: Amqp.pm.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use Amqp qw(login method header expect ss);

my ($port, $user, $pass, $line, $named) = @ARGV;
defined $named or die "usage: entry.pl PORT USER PASS LINE NAMED\n";
login($port, $user, $pass, "/");
method(1, 85, 10, "\0");    # confirm.select
expect(85, 11);
# Properties in their order: headers, then type.
my $headers = ss("queue") . "S" . pack("N/a*", $named);
method(1, 60, 40, pack("n", 0) . ss("") . ss($line) . "\0");
header(1, 0x2000 | 0x0020, pack("N/a*", $headers) . ss("amqplock.entry"));
expect(60, 80);             # basic.ack
exit 0;
