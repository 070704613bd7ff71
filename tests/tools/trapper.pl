#!/usr/bin/perl
# trapper.pl FILE: a command for amqplock hold that appends the name of every
# signal it gets to FILE: USR1, USR2, HUP and QUIT leave it running, TERM
# ends it with status 0, INT with status 9. It writes its slot to FILE.ready
# once its handlers are in place. It has no child that a signal sent to its
# process group could hit.
use strict;
use warnings;

my $file = shift or die "usage: trapper.pl FILE\n";
sub note {
    open(my $fh, ">>", $file) or die "$file: $!\n";
    print $fh "$_[0]\n";
    close $fh;
}
$SIG{$_} = \&note for qw(USR1 USR2 HUP QUIT);
$SIG{TERM} = sub { note("TERM"); exit 0 };
$SIG{INT} = sub { note("INT"); exit 9 };
open(my $r, ">", "$file.ready.tmp") or die "$file.ready.tmp: $!\n";
print $r(($ENV{AMQPLOCK_SLOT} // "unset") . "\n");
close $r;
rename "$file.ready.tmp", "$file.ready" or die "rename: $!\n";
sleep 1 while 1;
