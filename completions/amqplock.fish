# fish completion for amqplock(1): commands, their options and the global
# ones (accepted before and after the command), signals for --lost-signal,
# files for the options that name one, and "--" and a command for hold.

# The options that take a value, as amqplock's getopt tables have them.
set -g __amqplock_value_opts -u --url --password-file --cacert --cert --key --prefix --management-url \
    --heartbeat --connect-timeout --rpc-timeout --admin-wait --overshoot --slot-type -w --wait \
    -E --conflict-exit-code -c --command --lost-signal --grace --timeout --lease --min-hold --create

# Prints the command (create, hold, ...) and then, one a line, what follows
# it on the command line before the cursor: the options are left out.
# Prints "--" where the command's options end. Fails if there is no command
# yet.
function __amqplock_parse
    set -l words (commandline -opc)
    set -e words[1]
    set -l cmd
    set -l skip 0
    set -l dashdash 0
    for w in $words
        if test $skip = 1
            set skip 0
            continue
        end
        if test $dashdash = 1
            printf "%s\n" $w
            continue
        end
        switch $w
            case --
                if set -q cmd[1]
                    set dashdash 1
                    printf "%s\n" --
                end
            case '--*=*'
            case '--*'
                contains -- $w $__amqplock_value_opts; and set skip 1
            case '-?*'
                # a letter that takes a value takes the rest of the word,
                # or else the next word: -nw 5, -w5
                if string match -qr -- '^-[^uwEc]*[uwEc]$' $w
                    set skip 1
                end
            case '*'
                if not set -q cmd[1]
                    set cmd $w
                end
                printf "%s\n" $w
        end
    end
    set -q cmd[1]
end

function __amqplock_no_command
    not __amqplock_parse >/dev/null
end

# __amqplock_using CMD...: the command is one of CMD, and "--" is not typed.
function __amqplock_using
    set -l parsed (__amqplock_parse); or return 1
    contains -- $parsed[1] $argv; and not contains -- -- $parsed
end

# hold NAME has been typed, without -c, and no "--" yet.
function __amqplock_hold_wants_dashdash
    set -l parsed (__amqplock_parse); or return 1
    test "$parsed[1]" = hold; or return 1
    not contains -- -- $parsed; or return 1
    set -q parsed[2]; or return 1
    set -l words (commandline -opc)
    # -c TEXT, -nc TEXT, -cTEXT, --command[=TEXT]: no "--" then
    not string match -qr -- '^(-[^-uwEc]*c|--command(=.*)?$)' $words
end

# hold NAME -- ...: completes the command to run and its arguments.
function __amqplock_hold_command
    set -l parsed (__amqplock_parse); or return 1
    test "$parsed[1]" = hold; or return 1
    set -l i (contains -i -- -- $parsed); or return 1
    set -l rest $parsed[(math $i + 1)..-1] (commandline -ct)
    __fish_complete_subcommand --commandline $rest
end

function __amqplock_after_hold_dashdash
    set -l parsed (__amqplock_parse); or return 1
    test "$parsed[1]" = hold; and contains -- -- $parsed
end

complete -c amqplock -f

# Commands.
set -l nocmd __amqplock_no_command
complete -c amqplock -n $nocmd -a create -d 'Create a semaphore with SLOTS slots'
complete -c amqplock -n $nocmd -a destroy -d 'Delete every slot of a semaphore'
complete -c amqplock -n $nocmd -a add -d 'Add COUNT slots (default 1)'
complete -c amqplock -n $nocmd -a remove -d 'Remove the COUNT highest slots (default 1)'
complete -c amqplock -n $nocmd -a max -d 'Print the number of slots, or set it to N'
complete -c amqplock -n $nocmd -a status -d 'Show held, free and orphan slots'
complete -c amqplock -n $nocmd -a list -d 'List the semaphores, with max, held and waiting'
complete -c amqplock -n $nocmd -a evict -d "End the job of SLOT's holder; give the slot back once it has ended"
complete -c amqplock -n $nocmd -a check -d 'Report what is wrong with a semaphore, or repair it'
complete -c amqplock -n $nocmd -a wait -d 'Wait until no holder is left above max'
complete -c amqplock -n $nocmd -a acquire -d 'Take a slot, print it, hold it until a signal'
complete -c amqplock -n $nocmd -a hold -d 'Run a command while holding a slot'
complete -c amqplock -n $nocmd -a help -d "Show a command's options"
complete -c amqplock -n '__amqplock_using help' \
    -a 'create destroy add remove max status list evict check wait acquire hold'

# Global options, before or after the command (not after hold's "--").
set -l global 'not __amqplock_after_hold_dashdash'
complete -c amqplock -n $global -s u -l url -x -d 'Broker, amqp[s]://user:pass@host:port/vhost'
complete -c amqplock -n $global -l password-file -r -F -d 'Read the password from the first line of FILE'
complete -c amqplock -n $global -l cacert -r -F -d 'CA certificates for amqps://'
complete -c amqplock -n $global -l cert -r -F -d 'Client certificate for amqps:// (PEM)'
complete -c amqplock -n $global -l key -r -F -d 'Private key of the client certificate'
complete -c amqplock -n $global -l insecure -d "amqps:// without checking the broker's certificate"
complete -c amqplock -n $global -l prefix -x -d 'Queue-name prefix'
complete -c amqplock -n $global -l management-url -x -d 'The management HTTP API, for list and "did you mean"'
complete -c amqplock -n $global -l json -d 'Print one JSON object per result'
complete -c amqplock -n $global -s q -l quiet -d 'Print nothing on stdout'
complete -c amqplock -n $global -s v -l verbose -d 'Trace each step on stderr'
complete -c amqplock -n $global -l heartbeat -x -d 'AMQP heartbeat, whole seconds, 0 = off'
complete -c amqplock -n $global -l connect-timeout -x -d 'Give up connecting and logging in after SECS'
complete -c amqplock -n $global -l rpc-timeout -x -d 'Give up when a broker reply takes longer'
complete -c amqplock -n $global -s h -l help -d 'Show help and exit'
complete -c amqplock -n $global -s V -l version -d 'Show the version and exit'

# The administrative commands.
set -l admin '__amqplock_using create destroy add remove max evict check'
set -l scan '__amqplock_using create destroy add remove max status check wait'
complete -c amqplock -n $admin -l admin-wait -x -d 'Wait up to SECS for another administrator'
complete -c amqplock -n $scan -l overshoot -x -d 'Look N slots past max for strays and orphans'
complete -c amqplock -n '__amqplock_using check' -l repair -d 'Delete the stray queues found'
complete -c amqplock -n '__amqplock_using remove max' -l drain -d 'Let the holders of the slots removed finish their jobs'
complete -c amqplock -n '__amqplock_using status evict' -l no-names -d 'Do not ask the holders who they are'
complete -c amqplock -n '__amqplock_using status list' -l metrics -d 'Print OpenMetrics text'
complete -c amqplock -n '__amqplock_using create add max' -l slot-type -x -a 'classic quorum' -d 'Type of the slot queues'

# acquire, hold and wait.
set -l waiting '__amqplock_using acquire hold wait evict'
complete -c amqplock -n $waiting -s n -l nonblock -d 'Try once; do not wait'
complete -c amqplock -n $waiting -s w -l wait -x -d 'Give up after SECS (0 = -n)'
complete -c amqplock -n $waiting -s E -l conflict-exit-code -x -d 'Exit code when nothing was obtained in time'

# acquire and hold: how long the broker keeps the slot for a holder that
# lost its connection.
complete -c amqplock -n '__amqplock_using acquire hold' -l lease -x -d 'Keep the slot SECS for a holder that lost its connection (0 = none)'
# cron on every host: a short job's slot kept a while; a missing semaphore made.
complete -c amqplock -n '__amqplock_using acquire hold' -l min-hold -x -d 'Keep the slot SECS after it was taken, even if done sooner'
complete -c amqplock -n '__amqplock_using acquire hold' -l token -d 'Draw a fencing token: $AMQPLOCK_TOKEN, token in --json'
complete -c amqplock -n '__amqplock_using acquire hold' -l label -r -d 'What status shows beside host and pid'
complete -c amqplock -n '__amqplock_using acquire hold' -l create -x -d 'Create the semaphore with N slots if it does not exist'

# hold. The signals for --lost-signal are those amqplock accepts: the ones
# whose default action ends a process, by glibc's names (not KILL STOP CONT
# CHLD TSTP TTIN TTOU URG WINCH; 29 is POLL, not IO).
set -l holding '__amqplock_using hold'
complete -c amqplock -n $holding -s c -l command -x -d 'Run TEXT with /bin/sh -c instead of CMD'
function __amqplock_signals
    printf '%s\tsignal\n' HUP INT QUIT ILL TRAP ABRT BUS FPE USR1 SEGV USR2 PIPE ALRM TERM \
        STKFLT XCPU XFSZ VTALRM PROF POLL PWR SYS
end
complete -c amqplock -n $holding -l lost-signal -x -a '(__amqplock_signals)' -d 'Signal for the command if the slot is lost'
complete -c amqplock -n $holding -l grace -x -d 'SIGKILL the command this long after --lost-signal'
complete -c amqplock -n $holding -l timeout -x -d 'end the command after SECS, exit 124'
complete -c amqplock -n __amqplock_hold_wants_dashdash -a -- -d 'The command to run follows'
complete -c amqplock -n __amqplock_after_hold_dashdash -x -a '(__amqplock_hold_command)'
