# bash completion for wspipe(1).
# Install: copy to /usr/share/bash-completion/completions/wspipe (or
# ~/.local/share/bash-completion/completions/wspipe), or `source` it from ~/.bashrc.
# Keep in step with Option in Sources/WSPipeCLI/Options.swift: a test
# (Tests/WSPipeBridgeTests/CompletionTests.swift) checks every option is here.

_wspipe() {
    local cur prev
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}

    local flags="-t --text -b --binary -0 --null --interactive --no-interactive --no-history --jsonl --timestamps --base64 --whole-input
        -1 --one-message --require-count --receive-only --send-only --stats --no-close -k --insecure
        -4 --ipv4 -6 --ipv6 -L --location -v --verbose -q --quiet -h --help -V --version
        --echo --broadcast --require-protocol --require-bearer --sameorigin
        --reuseport
        --oneshot
        --metrics-public --devconsole
        --proxy-protocol
        --print-ping-rtt --reconnect --reconnect-on-close
        --print-match-only
        --no-deflate --deflate-client-no-context-takeover --deflate-server-no-context-takeover"
    local valued="--chunk-size --close-code --close-reason --close-timeout --connect-timeout
        --max-message-size --ping-interval --ping-timeout -H --header --protocol --origin
        --user-agent --bearer --bearer-file --cacert -n --max-messages --send --timeout
        --idle-timeout --linger --proxy --noproxy --socks5 --cert --key --key-pass-env
        --key-pass-file --tls-min --connect-to --sni --unix-socket --resolve --max-redirs
        -l --listen --path --allow-origin --health --response-header --max-clients --handshake-timeout
        --stale-timeout --retry-delay --retry-max-delay --max-retries --retry-reset
        --queue-size --queue-bytes --queue-policy --send-file
        --expect --expect-json --expect-timeout --until --until-json
        --exec --sh --dir --close-grace --max-children --passenv --client-ca
        --forward --forward-tokens
        --metrics --static --staticdir --bus --bus-inbound --bus-password-file --bus-ping
        --forward-listen
        --max-clients-per-ip --max-handshakes-per-ip --ipv6-prefix --rate-limit --byte-rate --rate-limit-action
        --trust-proxy --client-address-header
        --deflate-client-window-bits --deflate-server-window-bits --decompress"

    # A value given as --OPTION=value: complete the part after "=" as the value.
    local option=$prev
    if [[ $cur == --*=* ]]; then
        option=${cur%%=*}
        cur=${cur#*=}
    elif [[ $prev == = && $COMP_CWORD -ge 2 ]]; then
        # COMP_WORDBREAKS split --OPTION=value into three words: the option, "=", the value.
        option=${COMP_WORDS[COMP_CWORD-2]}
    fi

    case $option in
        -h|--help)
            # --help CATEGORY: the categories of `wspipe --help` (Option.Category).
            COMPREPLY=($(compgen -W "all modes formats limits ending connection compression reconnect conversation network tls request output server access web bus programs gateway" -- "$cur"))
            return ;;
        --cacert|--client-ca)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -f -- "$cur"))
            return ;;
        --bearer-file|--cert|--key|--key-pass-file|--unix-socket|--send-file|--forward-tokens)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -f -- "$cur"))
            return ;;
        --client-address-header)
            COMPREPLY=($(compgen -W "X-Forwarded-For Forwarded" -- "$cur"))
            return ;;
        --static|--staticdir)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -d -- "$cur"))
            return ;;
        --key-pass-env|--passenv)
            COMPREPLY=($(compgen -v -- "$cur"))
            return ;;
        --dir)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -d -- "$cur"))
            return ;;
        --exec)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -c -- "$cur"))
            return ;;
        --forward)
            COMPREPLY=($(compgen -W "tcp: unix:" -- "$cur"))
            return ;;
        --proxy)
            COMPREPLY=($(compgen -W "http:// https:// socks5:// socks5h://" -- "$cur"))
            compopt -o nospace 2>/dev/null
            return ;;
        --tls-min)
            COMPREPLY=($(compgen -W "1.2 1.3" -- "$cur"))
            return ;;
        --max-redirs)
            COMPREPLY=($(compgen -W "0 1 2 5 10" -- "$cur"))
            return ;;
        --noproxy|--socks5|--connect-to|--sni|--resolve)
            COMPREPLY=()
            return ;;
        --chunk-size|--max-message-size)
            COMPREPLY=($(compgen -W "4K 16K 64K 256K 1M 16M 64M 1G" -- "$cur"))
            return ;;
        --decompress)
            COMPREPLY=($(compgen -W "gzip zlib deflate" -- "$cur"))
            return ;;
        --deflate-client-window-bits|--deflate-server-window-bits)
            COMPREPLY=($(compgen -W "9 10 11 12 13 14 15" -- "$cur"))
            return ;;
        --close-code)
            COMPREPLY=($(compgen -W "1000 1001 1002 1003 1007 1008 1009 1010 1011 4000" -- "$cur"))
            return ;;
        --queue-policy)
            COMPREPLY=($(compgen -W "block drop-oldest drop-newest fail" -- "$cur"))
            return ;;
        --rate-limit-action)
            COMPREPLY=($(compgen -W "pause close" -- "$cur"))
            return ;;
        --rate-limit|--max-handshakes-per-ip)
            COMPREPLY=($(compgen -W "10/s 100/s 1000/s:2000" -- "$cur"))
            return ;;
        --byte-rate)
            COMPREPLY=($(compgen -W "64K/s 1M/s 1M/s:4M" -- "$cur"))
            return ;;
        --max-retries|--queue-size)
            COMPREPLY=($(compgen -W "0 1 3 10 100 1000 10000" -- "$cur"))
            return ;;
        --queue-bytes)
            COMPREPLY=($(compgen -W "64K 1M 16M 256M" -- "$cur"))
            return ;;
        --close-timeout|--connect-timeout|--ping-interval|--ping-timeout|--timeout|--idle-timeout|--linger|--stale-timeout|--retry-delay|--retry-max-delay|--retry-reset)
            COMPREPLY=($(compgen -W "0.5 1 5 10 30 60 300" -- "$cur"))
            return ;;
        -n|--max-messages)
            COMPREPLY=($(compgen -W "1 2 3 5 10 100" -- "$cur"))
            return ;;
        -H|--header)
            local IFS=$'\n'
            COMPREPLY=($(compgen -W $'Authorization: \nCookie: \nOrigin: \nUser-Agent: \nX-' -- "$cur"))
            compopt -o nospace 2>/dev/null
            return ;;
        --origin)
            COMPREPLY=($(compgen -W "http:// https://" -- "$cur"))
            compopt -o nospace 2>/dev/null
            return ;;
        --close-reason|--protocol|--user-agent|--bearer|--send)
            COMPREPLY=()
            return ;;
    esac

    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags $valued" -- "$cur"))
        return
    fi
    COMPREPLY=($(compgen -W "ws:// wss:// ws://127.0.0.1: ws://localhost: ws://[::1]: ws+unix://" -- "$cur"))
    compopt -o nospace 2>/dev/null
}

complete -F _wspipe wspipe
