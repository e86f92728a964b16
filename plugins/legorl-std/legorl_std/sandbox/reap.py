"""Kill every process of a sandbox but the one asking, from inside it: the process-reaper's
check, and the kill of a sandbox that has no other way to reach its processes."""

KILL_OTHERS = r"""keep=" 1 "; read -r p _ < /proc/self/stat
while [ "$p" -gt 1 ] 2>/dev/null; do keep="$keep$p "; read -r _ _ _ p _ < "/proc/$p/stat" || break; done
n=0; for round in 1 2 3; do
  set --; for d in /proc/[0-9]*; do i=${d#/proc/}; case "$keep" in *" $i "*) ;; *) [ -e "$d" ] && set -- "$@" "$i";; esac; done
  [ $# = 0 ] && break; [ $round = 1 ] && n=$#; kill -9 "$@" 2>/dev/null
done; echo $n"""
"""A shell script that kills every process it can see but itself, its ancestors and init, and
prints how many there were (no fork while listing: the shell's own builtins only)."""
