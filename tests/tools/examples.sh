#!/usr/bin/env bash
# examples.sh: the examples of README.md, docs/*.md and the man page, copied out
# into runnable form, so that tests/examples.bats runs them as they are
# written and they cannot drift from what amqplock does.
#
#   examples.sh list               one line per example: ID FILE:LINE KIND
#   examples.sh extract DIR SUFFIX  write DIR/ID.sh for each example, and
#                                  the stand-ins they use (see below)
#
# Which text is an example:
#
#   README.md, docs/*.md
#               a line `<!-- example: ID -->` (an HTML comment: invisible
#               on GitHub) followed, after blank lines, by either
#               - an indented code block (4 spaces): the example, or
#               - a table: its last column's code spans that begin with
#                 `amqplock `, row by row, are the example's commands
#                 (`\|` in a cell is `|`).
#   man page    every `.Bd -literal` ... `.Ed` block of the EXAMPLES
#               section, as man-1, man-2, ... in order; roff escapes
#               (\e, \-, \&, \(aq, \(dq) are undone.
#
# How a block is read (the same for every source):
#
#   - A block whose first line starts with `#!` is a script: DIR/ID.sh is
#     that script (substituted as below), made executable; the suite runs
#     it with arguments of its own.
#   - Otherwise each command is run in turn, in one bash (set -o pipefail):
#     if some line starts with `$ `, only those lines are commands and the
#     others are their output (not compared: slot numbers vary); else
#     every line but blank and `#` lines is one. A line ending in `\`, `|`,
#     `&&` or `||` goes on on the next. A command must exit 0, unless a
#     comment at its end begins with `exit N`: then it must exit N
#     (`amqplock status x   # exit 66: no such semaphore yet`). Multi-line
#     compound commands (if/for over several lines) are not supported
#     outside scripts.
#   - A comment line beginning with `# crontab` makes the rest of the
#     block a crontab: `NAME=value` lines set cron's environment, and each
#     line of five time fields (or @daily etc.) runs its command as cron
#     would on Debian: `/bin/sh -c COMMAND` in an empty environment but
#     HOME (DIR), LOGNAME, SHELL=/bin/sh, PATH=/usr/bin:/bin and the
#     crontab's variables (and ASAN_OPTIONS and UBSAN_OPTIONS, for a
#     sanitizer build), in HOME. A `%` in the command (cron makes it a
#     newline) is refused.
#
# Substitutions, in commands and crontab lines (never in output lines or
# comments), so that the examples run against the test broker
# ($AMQPLOCK_URL) and leave nothing behind:
#
#   semaphore names   every word that follows `amqplock [OPTIONS] COMMAND
#                     [OPTIONS]` in the example (options that take a value
#                     are read from src/cli.c) becomes NAME.SUFFIX wherever
#                     it stands as a whole word (between blanks, quotes,
#                     parentheses or `;`): each test has its own
#                     semaphores. Words with `$` are left alone.
#   broker URLs       an amqp:// or amqps:// URL whose host is example,
#                     *.example or *.example.{com,org,net} becomes the test
#                     broker's URL: with its password if the example's URL
#                     has one, else without (so that the example's
#                     --password-file must supply it), always amqp://.
#   --password-file F F (a path, not /dev/... or <(...)) becomes DIR/pw,
#                     mode 600, holding the test broker's password.
#   amqplock by path  /usr/local/bin/amqplock and /usr/bin/amqplock become
#                     DIR/bin/amqplock, which runs the binary under test
#                     (AMQPLOCK_BIN, under AMQPLOCK_WRAP if set); bare
#                     `amqplock` finds it too, DIR/bin being first in PATH
#                     (but not in cron's PATH: a crontab line must give the
#                     full path, as it must in a real crontab).
#   jobs              ./X, bin/X and /opt/... words become DIR/job, a
#                     stand-in that appends "$AMQPLOCK_SEMAPHORE
#                     $AMQPLOCK_SLOT" to DIR/job.log and exits 0.
#   the private broker  `tests/lib/broker.sh start D` becomes a check that
#                     tests/lib/broker.sh is there and a copy of the env file
#                     that tests/lib/broker.sh wrote for the test broker into
#                     D (so `. D/env` sources a real one); `tests/lib/broker.sh
#                     stop D` only checks that tests/lib/broker.sh is there
#                     (the test broker is tests/run.sh's to stop); /tmp/b
#                     becomes DIR/b.
#
# extract reads AMQPLOCK_URL and AMQPLOCK_TEST_BROKER_DIR (tests/run.sh's
# broker), AMQPLOCK_BIN and AMQPLOCK_WRAP. Paths and the URL must not
# contain blanks or quotes. DIR/prelude.sh defines what the commands'
# checks use; a suite runs `. DIR/prelude.sh; . DIR/ID.sh ...; exit
# $__ex_failed` in one bash, so that an example's exports reach the next.
set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export EXAMPLES_TOP=$TOP

usage() {
    echo "usage: examples.sh list | extract DIR SUFFIX" >&2
    exit 2
}

case ${1:-} in
list) [ $# -eq 1 ] || usage ;;
extract) [ $# -eq 3 ] || usage ;;
*) usage ;;
esac

exec perl -e "$(cat <<'PERL'
use strict;
use warnings;

my $top = $ENV{EXAMPLES_TOP};
my ($mode, $dir, $suffix) = @ARGV;

sub slurp {
    my ($f) = @_;
    open(my $h, "<", $f) or die "examples.sh: $f: $!\n";
    local $/;
    return scalar <$h>;
}

# --- what amqplock accepts: commands, and options that take a value ---

my $cli = slurp("$top/src/cli.c");
my $main = slurp("$top/src/main.c");
my %short_of = $cli =~ /\b(OPT_\w+)\s*=\s*'(.)'/g;
my (%value_opt, %command);
while ($cli =~ /\{"([a-z-]+)",\s*(OPT_\w+),\s*"[^"]*"/g) {
    $value_opt{"--$1"} = 1;
    $value_opt{"-$short_of{$2}"} = 1 if exists $short_of{$2};
}
$command{$1} = 1 while $main =~ /\{"([a-z]+)",\s*cmd_/g;
die "examples.sh: no options or commands found in src/cli.c, src/main.c\n"
    unless %value_opt && %command;

# --- the examples ---

my @examples;    # { id, where, lines => [[text, source line]], table }

sub add_example {
    my ($id, $where, $lines, $table) = @_;
    die "examples.sh: $where: example $id has no text\n" unless @$lines;
    die "examples.sh: $where: example $id given twice\n" if grep { $_->{id} eq $id } @examples;
    push @examples, {id => $id, where => $where, lines => $lines, table => $table};
}

# README.md and docs/*.md
for my $doc ("README.md", map { s{^\Q$top\E/}{}r } sort glob("$top/docs/*.md")) {
    my @r = split /\n/, slurp("$top/$doc"), -1;
    for (my $i = 0; $i < @r; $i++) {
        next unless $r[$i] =~ /^<!--\s*example:\s*(\S+)\s*-->\s*$/;
        my ($id, $at) = ($1, $i + 1);
        my $j = $i + 1;
        $j++ while $j < @r && $r[$j] =~ /^\s*$/;
        my @lines;
        if ($j < @r && $r[$j] =~ /^\|/) {
            # a table: skip the header and its rule
            $j += 2;
            for (; $j < @r && $r[$j] =~ /^\|/; $j++) {
                (my $row = $r[$j]) =~ s/\\\|/\x00/g;
                my @cells = split /\|/, $row;
                my $cell = $cells[-1];
                while ($cell =~ /`([^`]+)`/g) {
                    (my $code = $1) =~ s/\x00/|/g;
                    push @lines, [$code, $j + 1] if $code =~ /^amqplock /;
                }
            }
            add_example($id, "$doc:$at", \@lines, 1);
        } else {
            for (; $j < @r && ($r[$j] =~ /^    / || $r[$j] =~ /^\s*$/); $j++) {
                push @lines, [substr($r[$j], 4), $j + 1] if $r[$j] =~ /^    /;
                # a blank line ends the block unless indented text follows
                last if $r[$j] =~ /^\s*$/ && !($j + 1 < @r && $r[$j + 1] =~ /^    /);
            }
            add_example($id, "$doc:$at", \@lines, 0);
        }
    }
}

# man/amqplock.1, EXAMPLES
{
    my @m = split /\n/, slurp("$top/man/amqplock.1"), -1;
    my ($in, $n, @lines, $at) = (0, 0);
    for (my $i = 0; $i < @m; $i++) {
        if ($m[$i] =~ /^\.Sh\s+(.*)/) { $in = $1 eq "EXAMPLES"; next }
        next unless $in;
        if ($m[$i] =~ /^\.Bd\s+-literal/) { @lines = (); $at = $i + 1; next }
        if ($m[$i] =~ /^\.Ed\b/) {
            $n++;
            add_example("man-$n", "man/amqplock.1:$at", [@lines], 0);
            next;
        }
        next unless defined $at;
        my $t = $m[$i];
        $t =~ s/\\\(aq/'/g;
        $t =~ s/\\\(dq/"/g;
        $t =~ s/\\-/-/g;
        $t =~ s/\\&//g;
        $t =~ s/\\e/\\/g;
        push @lines, [$t, $i + 1];
    }
}

if ($mode eq "list") {
    for my $e (@examples) {
        my $kind = $e->{table} ? "table" : $e->{lines}[0][0] =~ /^#!/ ? "script" : "commands";
        print "$e->{id} $e->{where} $kind\n";
    }
    exit 0;
}

# --- extract ---

my $url = (split ' ', $ENV{AMQPLOCK_URL} // "")[0]
    or die "examples.sh: AMQPLOCK_URL is not set (the test broker)\n";
my ($scheme, $user, $pass, $hostpart) = $url =~ m{^(amqps?)://([^:\@/]*):([^\@/]*)\@(.*)$}
    or die "examples.sh: AMQPLOCK_URL $url has no user:password\n";
my $url_nopass = "$scheme://$user\@$hostpart";
my $broker_dir = $ENV{AMQPLOCK_TEST_BROKER_DIR}
    or die "examples.sh: AMQPLOCK_TEST_BROKER_DIR is not set\n";
my $bin = $ENV{AMQPLOCK_BIN} || "$top/amqplock";
my $wrap = $ENV{AMQPLOCK_WRAP} // "";
for ($dir, $url, $broker_dir, $bin, $suffix) {
    die "examples.sh: '$_' has a blank or a quote\n" if /[\s'"\\]/;
}
die "examples.sh: SUFFIX '$suffix' is not a name's tail\n" unless $suffix =~ /^[A-Za-z0-9_:-]+$/;

mkdir $dir unless -d $dir;
mkdir "$dir/bin" unless -d "$dir/bin";

sub put {
    my ($file, $text, $perm) = @_;
    open(my $h, ">", $file) or die "examples.sh: $file: $!\n";
    print $h $text;
    close $h or die;
    chmod $perm, $file;
}
sub shq { my ($s) = @_; $s =~ s/'/'\\''/g; return "'$s'" }

put("$dir/bin/amqplock", "#!/bin/sh\nexec $wrap $bin \"\$@\"\n", 0755);
put("$dir/pw", "$pass\n", 0600);
put("$dir/job", "#!/bin/sh\n# a stand-in for the examples' jobs\n"
    . "echo \"\$AMQPLOCK_SEMAPHORE \$AMQPLOCK_SLOT\" >>$dir/job.log\n", 0755);
put("$dir/prelude.sh", <<EOT, 0644);
# Sourced before the examples (tests/tools/examples.sh).
set -u -o pipefail
cd $dir
export PATH=$dir/bin:\$PATH
__ex_failed=0
# __ex_check STATUS EXPECTED WHERE: the command at WHERE exited as it says
__ex_check() {
    if [ "\$1" -ne "\$2" ]; then
        echo "examples: \$3: exit \$1, expected \$2" >&2
        __ex_failed=1
    fi
    return "\$1"
}
# __ex_cron FILE [NAME=VALUE...]: FILE's command, run as cron runs it
# (a sanitizer build's options pass, so that its reports are collected)
__ex_cron() {
    local f=\$1
    shift
    (cd $dir && env -i HOME=$dir LOGNAME="\$(id -un)" SHELL=/bin/sh PATH=/usr/bin:/bin \\
        \${ASAN_OPTIONS:+"ASAN_OPTIONS=\$ASAN_OPTIONS"} \${UBSAN_OPTIONS:+"UBSAN_OPTIONS=\$UBSAN_OPTIONS"} \\
        "\$@" /bin/sh -c "\$(cat "\$f")")
}
EOT

# the semaphore names an example uses
sub names_in {
    my (@cmds) = @_;
    my %names;
    for my $c (@cmds) {
        my @w = map { (my $x = $_) =~ s/^['"]|['"]$//g; $x } split ' ', $c;
        for (my $i = 0; $i < @w; $i++) {
            next unless $w[$i] =~ m{(^|/)amqplock$};
            my $k = $i + 1;
            my $skip_options = sub {
                while ($k < @w && $w[$k] =~ /^-/ && $w[$k] ne "--") {
                    my $o = $w[$k++];
                    next if $o =~ /=/;
                    if ($o =~ /^--/) { $k++ if $value_opt{$o} }
                    elsif (length($o) > 1) { $k++ if $value_opt{"-" . substr($o, -1)} }
                }
            };
            $skip_options->();
            next unless $k < @w && $command{$w[$k]};
            $k++;
            $skip_options->();
            next unless $k < @w;
            $names{$w[$k]} = 1 if $w[$k] =~ /^[A-Za-z0-9._:-]+$/;
        }
    }
    return sort keys %names;
}

sub substitute {
    my ($t, $names) = @_;
    # broker URLs on example hosts
    $t =~ s{amqps?://(?:([^\s'"/\@:]*)(:[^\s'"/\@]*)?\@)?([A-Za-z0-9.-]+)(?::\d+)?(?:/[^\s'"]*)?}{
        my ($pw, $host, $all) = ($2, $3, $&);
        $host =~ /(^|\.)example(\.(com|org|net))?$/ ? (defined $pw ? $url : $url_nopass) : $all
    }ge;
    # password files
    $t =~ s{(--password-file(?:=|\s+))(?!/dev/|<\()[^\s'";|&]+}{$1$dir/pw}g;
    # amqplock by its installed path
    $t =~ s{/usr(?:/local)?/bin/amqplock\b}{$dir/bin/amqplock}g;
    # the private broker
    $t =~ s{(?<![\w/])tests/lib/broker\.sh\s+start\s+(\S+)}{test -x $top/tests/lib/broker.sh && mkdir -p $1 && cp $broker_dir/env $1/env}g;
    $t =~ s{(?<![\w/])tests/lib/broker\.sh\s+stop\s+\S+}{test -x $top/tests/lib/broker.sh}g;
    $t =~ s{/tmp/b(?=[/\s;&|]|$)}{$dir/b}g;
    # jobs
    $t =~ s{(?<=[\s'"(;])(?:\./[\w.-]+|bin/[\w.-]+|/opt/[\w./-]+)(?=$|[\s'";)|&])}{$dir/job}g;
    $t =~ s{^(?:\./[\w.-]+|bin/[\w.-]+|/opt/[\w./-]+)(?=$|[\s'";)|&])}{$dir/job}g;
    # semaphore names
    for my $n (@$names) {
        $t =~ s{(?<![^\s'"(;])\Q$n\E(?![^\s'");])}{$n.$suffix}g;
    }
    return $t;
}

for my $e (@examples) {
    my @lines = @{$e->{lines}};
    my $src = $e->{where} =~ s/:\d+$//r;
    my $out = "# $e->{id}: $e->{where}\n";
    if (!$e->{table} && $lines[0][0] =~ /^#!/) {
        my @names = names_in(map { $_->[0] } @lines);
        my $body = join "", map { ($_->[0] =~ /^\s*#/ ? $_->[0] : substitute($_->[0], \@names)) . "\n" } @lines;
        put("$dir/$e->{id}.sh", $body, 0755);
        next;
    }
    # join continuations, classify
    my $prompt = !$e->{table} && grep { $_->[0] =~ /^\$ / } @lines;
    my (@cmds, @cron_env, $cron);
    for (my $i = 0; $i < @lines; $i++) {
        my ($t, $ln) = @{$lines[$i]};
        if (!$e->{table} && $t =~ /^#\s*crontab\b/) { $cron = 1; next }
        if ($cron) {
            next if $t =~ /^\s*(#|$)/;
            if ($t =~ /^([A-Za-z_]\w*)=(.*)$/) { push @cron_env, [$1, $2, $ln]; next }
            if ($t =~ /^[\@*0-9]/ && $t =~ /^(?:\@\w+\s+|(?:\S+\s+){5})(.*)$/) {
                push @cmds, {cron => 1, text => $1, line => $ln};
                next;
            }
            die "examples.sh: $src:$ln: not a crontab line: $t\n";
        }
        if ($prompt) {
            next unless $t =~ s/^\$ //;
        } else {
            next if $t =~ /^\s*(#|$)/;
        }
        # a backslash-newline is removed, as the shell does; after | && ||
        # the newline stays
        while ($t =~ /(\\|\||&&|\|\|)\s*$/ && $i + 1 < @lines) {
            if ($1 eq "\\") {
                $t =~ s/\\\s*$//;
                $t .= $lines[++$i][0];
            } else {
                $t .= "\n" . $lines[++$i][0];
            }
        }
        push @cmds, {text => $t, line => $ln};
    }
    die "examples.sh: $e->{where}: example $e->{id} has no command\n" unless @cmds;
    my @names = names_in(map { $_->{text} } @cmds);
    for my $c (@cmds) {
        my $where = "$src:$c->{line}";
        if ($c->{cron}) {
            my $t = substitute($c->{text}, \@names);
            die "examples.sh: $where: a % in a crontab command is a newline to cron\n" if $t =~ /(?<!\\)%/;
            my $f = "$dir/$e->{id}.cron$c->{line}";
            put($f, "$t\n", 0644);
            my @env = map { shq("$_->[0]=" . substitute($_->[1], \@names)) } @cron_env;
            $out .= "__ex_cron $f @env\n__ex_check \$? 0 " . shq($where) . "\n";
        } else {
            my $expect = $c->{text} =~ /\s#\s*exit\s+(\d+)\b[^\n]*$/ ? $1 : 0;
            $out .= substitute($c->{text}, \@names) . "\n__ex_check \$? $expect " . shq($where) . "\n";
        }
    }
    put("$dir/$e->{id}.sh", $out, 0644);
}
PERL
)" "$@"
