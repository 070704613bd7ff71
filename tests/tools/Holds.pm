# Holds.pm: which amqplock hold a process runs under, for the fault
# suite's tools. CMD's parent is the keeper (comm "amqp-keeper"), whose
# parent is amqplock itself (comm "amqplock"); orphans of CMD's tree are
# reparented to the keeper. Comms are checked so that a reused pid is
# never taken for a hold.
package Holds;
use strict;
use warnings;
use Exporter 'import';
our @EXPORT_OK = qw(comm ppid hold_of);

# comm PID: its name, or '' if it is gone
sub comm {
    my ($pid) = @_;
    open(my $f, '<', "/proc/$pid/comm") or return '';
    my $c = <$f> // '';
    chomp $c;
    return $c;
}

# ppid PID: its parent's pid, or 0 if it is gone
sub ppid {
    my ($pid) = @_;
    open(my $f, '<', "/proc/$pid/stat") or return 0;
    my $s = <$f> // '';
    # "pid (comm) state ppid ...": comm may hold anything, even ") "
    return $s =~ /.*\) \S+ (\d+)/s ? $1 : 0;
}

# hold_of PID: the pid of the amqplock hold whose keeper is an ancestor of
# PID (at most 4 generations up), or 0
sub hold_of {
    my ($pid) = @_;
    for (1 .. 4) {
        $pid = ppid($pid) or return 0;
        if (comm($pid) eq 'amqp-keeper') {
            my $hold = ppid($pid);
            return $hold && comm($hold) eq 'amqplock' ? $hold : 0;
        }
    }
    return 0;
}

1;
