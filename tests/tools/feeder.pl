#!/usr/bin/perl
# feeder.pl FIFO PID: waits (10 s at most) until process PID has FIFO open
# for reading, prints PID's command line (NULs as spaces, one line), then
# writes what it reads on its own stdin into FIFO and closes it. So a test
# sees the command line of an amqplock blocked on --password-file FIFO,
# after it parsed its options, and then lets it go on; the text written is
# on no command line. Exits 0, or 1 if PID ended or never opened FIFO.
use strict;
use warnings;
use Fcntl;
use Time::HiRes qw(sleep time);

my ($fifo, $pid) = @ARGV;
defined $pid or die "usage: feeder.pl FIFO PID\n";
my $end = time + 10;

# PID is gone, or a zombie.
sub ended {
    open(my $f, '<', "/proc/$pid/stat") or return 1;
    my $stat = <$f> // '';
    return $stat =~ /\) Z /;
}

my $w;
# A non-blocking open for writing fails (ENXIO) until a reader is there.
until (sysopen($w, $fifo, O_WRONLY | O_NONBLOCK)) {
    $!{ENXIO} or die "$fifo: $!\n";
    if (ended() || time > $end) {
        print STDERR "feeder.pl: process $pid never opened $fifo\n";
        exit 1;
    }
    sleep 0.01;
}
open(my $c, '<:raw', "/proc/$pid/cmdline") or die "/proc/$pid/cmdline: $!\n";
my $cmdline = do { local $/; <$c> } // '';
$cmdline =~ tr/\0/ /;
$cmdline =~ s/ $//;
print "$cmdline\n";
my $flags = fcntl($w, F_GETFL, 0) or die "fcntl: $!\n";
fcntl($w, F_SETFL, $flags & ~O_NONBLOCK) or die "fcntl: $!\n";
local $/;
my $text = <STDIN> // '';
syswrite($w, $text) // die "$fifo: $!\n";
close $w;
exit 0;
