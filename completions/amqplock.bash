# bash completion for amqplock(1)                          -*- shell-script -*-
#
# Completes the commands, each command's options and the global ones (which
# amqplock accepts before and after the command), signal names after
# --lost-signal, file names after the options that name a file, "--" after
# "hold NAME", and the command to run after it. Needs nothing but bash;
# with bash-completion loaded, the command after "hold NAME --" is
# completed by its own completion, as for sudo.

_amqplock_global_opts='--url --password-file --cacert --cert --key --insecure
    --prefix --management-url --json --quiet --verbose --heartbeat
    --connect-timeout --rpc-timeout --help --version'

_amqplock_commands='create destroy add remove max status list evict check wait acquire hold help'

# The signals amqplock accepts for --lost-signal: those whose default action
# ends a process, by the names glibc gives them (not KILL STOP CONT CHLD
# TSTP TTIN TTOU URG WINCH; 29 is POLL, not IO).
_amqplock_signals='HUP INT QUIT ILL TRAP ABRT BUS FPE USR1 SEGV USR2 PIPE ALRM
    TERM STKFLT XCPU XFSZ VTALRM PROF POLL PWR SYS'

# _amqplock_command_opts COMMAND: the options of COMMAND besides the global ones.
_amqplock_command_opts() {
    case $1 in
    create | add) echo --admin-wait --overshoot --slot-type ;;
    max) echo --admin-wait --overshoot --slot-type --drain ;;
    remove) echo --admin-wait --overshoot --drain ;;
    destroy) echo --admin-wait --overshoot ;;
    status) echo --overshoot --no-names --metrics ;;
    list) echo --metrics ;;
    evict) echo --admin-wait --nonblock --wait --conflict-exit-code --no-names ;;
    check) echo --admin-wait --overshoot --repair ;;
    wait) echo --overshoot --nonblock --wait --conflict-exit-code ;;
    acquire) echo --nonblock --wait --conflict-exit-code --lease --min-hold --token --label --create ;;
    hold) echo --nonblock --wait --conflict-exit-code --command --lost-signal --grace --timeout --lease \
        --min-hold --token --label --create ;;
    esac
}

# _amqplock_value_opt OPTION: OPTION (long, or one short letter with its
# dash) takes a value.
_amqplock_value_opt() {
    case $1 in
    -u | --url | --password-file | --cacert | --cert | --key | --prefix | --management-url | \
        --heartbeat | --connect-timeout | --rpc-timeout | --admin-wait | \
        --overshoot | --slot-type | -w | --wait | -E | --conflict-exit-code | -c | \
        --command | --lost-signal | --grace | --timeout | --lease | --min-hold | --create)
        return 0
        ;;
    esac
    return 1
}

# Sets _aw (the words), _ai (the index of the word under the cursor) and
# _as (for each word, the index in COMP_WORDS where it starts): COMP_WORDS
# with the pieces that COMP_WORDBREAKS split off (--opt=value, a URL's
# colons) joined again, using COMP_LINE to see where blanks were.
_amqplock_words() {
    local rest=${COMP_LINE-} i n=-1 w
    _aw=() _as=() _ai=$COMP_CWORD
    for ((i = 0; i < ${#COMP_WORDS[@]}; i++)); do
        w=${COMP_WORDS[i]}
        if [[ $rest =~ ^[[:space:]]+ ]]; then
            rest=${rest:${#BASH_REMATCH}}
            ((n++))
            _aw[n]=$w _as[n]=$i
        elif ((n < 0)); then
            n=0 _aw[0]=$w _as[0]=$i
        else
            _aw[n]+=$w
        fi
        if [[ ${rest:0:${#w}} != "$w" ]]; then
            # COMP_LINE does not match (not set by the shell): as given
            _aw=("${COMP_WORDS[@]}") _ai=$COMP_CWORD _as=()
            for ((i = 0; i < ${#COMP_WORDS[@]}; i++)); do _as[i]=$i; done
            return
        fi
        rest=${rest:${#w}}
        ((i == COMP_CWORD)) && _ai=$n
    done
}

# _amqplock_reply CUR WORD...: COMPREPLY gets the WORDs that start with CUR,
# each without the part of CUR that readline does not replace (up to the
# last = or : that COMP_WORDBREAKS splits at).
_amqplock_reply() {
    local cur=$1 keep='' breaks='' c
    shift
    COMPREPLY=()
    [[ ${COMP_WORDBREAKS-} == *=* ]] && breaks+='='
    [[ ${COMP_WORDBREAKS-} == *:* ]] && breaks+=':'
    [[ -n $breaks ]] && keep=${cur%"${cur##*["$breaks"]}"}
    for c in "$@"; do
        [[ $c == "$cur"* ]] && COMPREPLY+=("${c#"$keep"}")
    done
}

# _amqplock_value OPTION VALUE PREFIX: completes the VALUE of OPTION; PREFIX
# is what stands before VALUE in the word ("--opt=" or "").
_amqplock_value() {
    local opt=$1 val=$2 pre=$3 s files sigs=() sig=''
    case $opt in
    --password-file | --cacert | --cert | --key)
        compopt -o filenames 2>/dev/null
        mapfile -t files < <(compgen -f -- "$val")
        _amqplock_reply "$pre$val" "${files[@]/#/$pre}"
        ;;
    --lost-signal)
        # amqplock takes names with or without SIG, in any case
        [[ $val == [Ss][Ii][Gg]* ]] && sig=${val:0:3} val=${val:3}
        for s in $_amqplock_signals; do
            [[ -n $val && $val == "${val,,}" ]] && s=${s,,}
            sigs+=("$pre$sig$s")
        done
        _amqplock_reply "$pre$sig$val" "${sigs[@]}"
        ;;
    --slot-type)
        _amqplock_reply "$pre$val" "${pre}classic" "${pre}quorum"
        ;;
    *)
        COMPREPLY=() # a URL, a prefix, a number or a shell command
        ;;
    esac
}

_amqplock() {
    local _aw _ai _as
    _amqplock_words
    local cur=${_aw[_ai]} i w cmd='' value_of='' dashdash=0 nargs=0 shell_text=0
    local IFS=$' \t\n'
    COMPREPLY=()

    # What the words before the cursor say.
    for ((i = 1; i < _ai; i++)); do
        w=${_aw[i]}
        if [[ -n $value_of ]]; then
            value_of=''
        elif ((dashdash)); then
            ((nargs++))
        elif [[ $w == -- ]]; then
            # before the command, "--" only ends the global options
            [[ -n $cmd ]] && dashdash=$i
        elif [[ $w == --?*=* ]]; then
            [[ $w == --command=* ]] && shell_text=1
        elif [[ $w == --?* ]]; then
            _amqplock_value_opt "$w" && value_of=$w
            [[ $w == --command ]] && shell_text=1
        elif [[ $w == -?* ]]; then
            # -nw SECS, -w5, -Ec: a letter that takes a value takes the
            # rest of the word, or else the next word
            local j
            for ((j = 1; j < ${#w}; j++)); do
                if _amqplock_value_opt "-${w:j:1}"; then
                    [[ ${w:j:1} == c ]] && shell_text=1
                    ((j == ${#w} - 1)) && value_of=-${w:j:1}
                    break
                fi
            done
        elif [[ -z $cmd ]]; then
            cmd=$w
        else
            ((nargs++))
        fi
    done

    # The value of an option.
    if [[ -n $value_of ]]; then
        _amqplock_value "$value_of" "$cur" ''
        return
    fi
    if ((!dashdash)) && [[ $cur == --?*=* ]]; then
        _amqplock_value "${cur%%=*}" "${cur#*=}" "${cur%%=*}="
        return
    fi

    # After "hold NAME --": the command to run, and its arguments.
    if ((dashdash)); then
        [[ $cmd == hold ]] || return
        if ((_ai == dashdash + 1)); then
            # shellcheck disable=SC2207
            COMPREPLY=($(compgen -c -- "$cur"))
            if [[ $cur == */* ]]; then
                compopt -o filenames 2>/dev/null
                # shellcheck disable=SC2207
                COMPREPLY+=($(compgen -f -- "$cur"))
            fi
        elif declare -F _comp_command_offset >/dev/null; then
            _comp_command_offset "${_as[dashdash + 1]}"
        elif declare -F _command_offset >/dev/null; then
            _command_offset "${_as[dashdash + 1]}"
        else
            compopt -o filenames 2>/dev/null
            # shellcheck disable=SC2207
            COMPREPLY=($(compgen -f -- "$cur"))
        fi
        return
    fi

    # Options: the global ones before the command, and the command's own
    # as well after it.
    if [[ $cur == -* ]]; then
        local opts=$_amqplock_global_opts
        [[ -n $cmd ]] && opts="$(_amqplock_command_opts "$cmd") $opts"
        [[ $cmd == hold ]] && ((nargs >= 1 && !shell_text)) && opts="-- $opts"
        # shellcheck disable=SC2086
        _amqplock_reply "$cur" $opts
        return
    fi

    case $cmd in
    '')
        # shellcheck disable=SC2086
        _amqplock_reply "$cur" $_amqplock_commands
        ;;
    help)
        ((nargs == 0)) && _amqplock_reply "$cur" ${_amqplock_commands% help}
        ;;
    hold)
        # after NAME comes "--" and the command (unless -c TEXT)
        ((nargs >= 1 && !shell_text)) && _amqplock_reply "$cur" --
        ;;
    esac
}

complete -F _amqplock amqplock
