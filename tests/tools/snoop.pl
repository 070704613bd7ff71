#!/usr/bin/perl
# snoop.pl PATTERNS: run as CMD (amqplock hold NAME -- perl snoop.pl
# PATTERNS), looks for any line of the file PATTERNS (a password and a part
# of it) everywhere this process can read: its own environment; the
# cmdline, environ and memory (/proc/PID/mem, region by region as
# /proc/PID/maps lists them) of each of its ancestors; the cmdline and
# environ of every process; and `ps auxeww`. The patterns are read from a
# file so that they are on no command line, and this process's own /proc
# entries are left out (they hold the patterns).
#
# Prints one line per place: "read WHERE", "unreadable WHERE (why)" or
# "FOUND WHERE"; ancestors as "ancestor PID COMM: cmdline|environ|mem".
# Exits 1 if a pattern was found anywhere, 0 if not, 2 on bad use.
use strict;
use warnings;
no warnings 'portable';    # 64-bit addresses in hex

@ARGV == 1 or die "usage: snoop.pl PATTERNS\n";
open(my $pf, '<', $ARGV[0]) or do { print "cannot read $ARGV[0]: $!\n"; exit 2 };
my @patterns = grep { length } map { chomp; $_ } <$pf>;
close $pf;
@patterns or do { print "no patterns in $ARGV[0]\n"; exit 2 };

my $found = 0;

sub has_pattern {
    my ($text) = @_;
    for my $p (@patterns) {
        return 1 if index($text, $p) >= 0;
    }
    return 0;
}

# look WHERE TEXT: reports TEXT as read, or its pattern as found.
sub look {
    my ($where, $text) = @_;
    if (has_pattern($text)) {
        print "FOUND $where\n";
        $found = 1;
    } else {
        print "read $where\n";
    }
}

# The whole of a file, or undef with $! set.
sub slurp {
    my ($path) = @_;
    open(my $f, '<:raw', $path) or return undef;
    local $/;
    my $text = <$f>;
    defined $text or return undef;
    return $text;
}

sub parent_of {
    my ($pid) = @_;
    my $stat = slurp("/proc/$pid/stat") // return 0;
    return $stat =~ /\) \S+ (\d+)/ ? $1 : 0;
}

# Every readable region of PID's memory, searched; undef and $! if the
# memory cannot be opened at all.
sub search_mem {
    my ($pid) = @_;
    open(my $maps, '<', "/proc/$pid/maps") or return undef;
    open(my $mem, '<:raw', "/proc/$pid/mem") or return undef;
    my $hit = 0;
    while (my $line = <$maps>) {
        my ($from, $to, $perms, $name) =
            $line =~ /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/ or next;
        next if substr($perms, 0, 1) ne 'r' || $name =~ /^\[(vvar|vsyscall)/;
        ($from, $to) = (hex $from, hex $to);
        sysseek($mem, $from, 0) or next;
        my $buf = '';
        my $n = sysread($mem, $buf, $to - $from);
        next unless $n;
        if (has_pattern($buf)) {
            $hit = 1;
            last;
        }
    }
    return $hit;
}

look('own environment', join("\n", map { "$_=$ENV{$_}" } sort keys %ENV));

# The ancestors, closest first.
for (my $pid = getppid(); $pid > 1; $pid = parent_of($pid)) {
    my $comm = slurp("/proc/$pid/comm") // '?';
    chomp $comm;
    my $who = "ancestor $pid $comm";
    for my $file (qw(cmdline environ)) {
        my $text = slurp("/proc/$pid/$file");
        if (defined $text) {
            look("$who: $file", $text);
        } else {
            print "unreadable $who: $file ($!)\n";
        }
    }
    my $hit = search_mem($pid);
    if (!defined $hit) {
        print "unreadable $who: mem ($!)\n";
    } elsif ($hit) {
        print "FOUND $who: mem\n";
        $found = 1;
    } else {
        print "read $who: mem\n";
    }
}

# Every process but this one.
my %read = (cmdline => 0, environ => 0);
opendir(my $proc, '/proc') or die "/proc: $!\n";
for my $pid (grep { /^\d+$/ && $_ != $$ } readdir $proc) {
    for my $file (qw(cmdline environ)) {
        my $text = slurp("/proc/$pid/$file") // next;
        $read{$file}++;
        if (has_pattern($text)) {
            my $comm = slurp("/proc/$pid/comm") // "?\n";
            chomp $comm;
            print "FOUND process $pid $comm: $file\n";
            $found = 1;
        }
    }
}
closedir $proc;
print "read cmdline of $read{cmdline} processes, environ of $read{environ}\n";

my $ps = `ps auxeww 2>&1`;
look('ps auxeww (' . ($ps =~ tr/\n//) . ' lines)', $ps);

exit $found;
