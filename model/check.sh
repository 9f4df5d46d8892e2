#!/bin/sh
# check.sh: runs spin on the model and checks its verdict.
#
#   check.sh holds NAME [FLAGS...]              the model must hold (safety, each fault kind)
#   check.sh fails NAME PROPERTY [FLAGS...]     it must fail, with PROPERTY's assertion
#   check.sh live NAME [FLAGS...]               property 3 must hold under weak fairness
#
# FLAGS are preprocessor flags (-DGIVEUP=95). MODEL_FLAGS from the
# environment are added to every run. Artifacts (pan.c, pan, the trail) go
# to $MODEL_OUT/NAME (default model/out, ignored by git); a failure leaves
# its trail there, and the command to replay it is printed.
#
# Several checks may run at once (make model runs two): each one works in a
# temporary directory of its own, which replaces $MODEL_OUT/NAME only when
# the check is done, and prints its report in one piece at the end.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${MODEL_OUT:-$here/out}
mode=$1 name=$2; shift 2
want=
if [ "$mode" = fails ]; then want=$1; shift; fi
flags="$* ${MODEL_FLAGS:-}"
mkdir -p "$out"
out=$(cd "$out" && pwd)
dir=$out/$name
work=$(mktemp -d "$out/.$name.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 1' HUP INT TERM
cp "$here/monolock.pml" "$work/monolock.pml"
cd "$work"

# The assertion that stands for each property.
assertion() {
	case $1 in
	1) echo 'excused[i]' ;;                # no two clients work at once
	2-tokens) echo 't>lastGrantTok' ;;     # tokens strictly increase
	2-fence) echo 'pendingGen' ;;          # no older write after the newer holder's
	*) echo "check.sh: unknown property $1" >&2; exit 2 ;;
	esac
}

# pan: exhaustive (no bitstate, no hash compaction), COLLAPSE only
# compresses how states are stored, it loses none. A search that must hold
# visits millions of states and is compiled with -O2 (about four times
# faster); a known-bad variant stops at its first counterexample, where
# -O2's compile (about 10 s of CPU) costs more than it saves, so -O0.
spin -a $flags monolock.pml >/dev/null
case $mode in
live)
	gcc -O2 -DNFAIR=3 -DCOLLAPSE -DMEMLIM=2048 -o pan pan.c
	./pan -m1000000 -a -f >pan.out 2>&1 || true ;;
holds)
	gcc -O2 -DSAFETY -DNOCLAIM -DCOLLAPSE -DMEMLIM=2048 -o pan pan.c
	./pan -m1000000 >pan.out 2>&1 || true ;;
fails)
	gcc -O0 -DSAFETY -DNOCLAIM -DCOLLAPSE -DMEMLIM=2048 -o pan pan.c
	./pan -m1000000 >pan.out 2>&1 || true ;;
*)
	echo "check.sh: unknown mode $mode: want holds, fails or live" >&2; exit 2 ;;
esac

# judge prints the verdict; its status is the check's.
judge() {
	summary=$(grep -E 'errors:' pan.out || true)
	stored=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.out)
	elapsed=$(sed -n 's/^pan: elapsed time \(.*\)/\1/p' pan.out)
	if grep -qE 'search depth too small|out of memory|max search depth too small' pan.out; then
		echo "FAIL $name: the search was not exhaustive:"; grep -E 'depth too small|memory' pan.out; return 1
	fi
	case $mode in
	holds|live)
		case $summary in
		*'errors: 0'*) echo "ok   $name: holds ($stored states, $summary, ${elapsed})"; return 0 ;;
		esac
		echo "FAIL $name: expected to hold, got:"; grep -E 'violated|acceptance cycle|invalid end|errors:' pan.out
		echo "replay: cd $dir && spin -t $flags monolock.pml | grep 't='"; return 1 ;;
	fails)
		expr=$(assertion "$want")
		if grep 'assertion violated' pan.out | grep -qF "$expr"; then
			steps=$(spin -t $flags monolock.pml 2>/dev/null | sed -n 's/^spin: trail ends after \([0-9]*\) steps/\1/p')
			echo "ok   $name: fails property $want, trail of $steps steps (replay: cd $dir && spin -t $flags monolock.pml | grep 't=')"
			return 0
		fi
		echo "FAIL $name: expected property $want to fail, got:"; grep -E 'violated|invalid end|errors:' pan.out; return 1 ;;
	esac
}

status=0
judge >report || status=$?
# The trail and the replay command are for $dir: it becomes the artifacts.
cd "$out"
rm -rf "$dir"
mv "$work" "$dir"
trap - EXIT
cat "$dir/report"
exit $status
