#!/usr/bin/env python3
"""Prefill and decode tokens/s of one model in several kernel tiers, `fak bench` pinned to each
tier with FAK_KERNEL_TIER, in interleaved rounds (so a change of machine load hits every tier
alike); prints each tier's median and its ratio to the first tier's. Outside CI.

  bench/tier_compare.py build/release/tools/fak/fak MODEL [--tiers avx2,avx512_skx,avx512]
                        [--rounds 5] [--tokens 256] [--decode 32] [--threads 1]
"""
import argparse
import json
import os
import statistics
import subprocess


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fak")
    ap.add_argument("model")
    ap.add_argument("--tiers", default="avx2,avx512_skx,avx512")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    tiers = args.tiers.split(",")
    runs = {t: {"prefill": [], "decode": []} for t in tiers}
    for r in range(args.rounds):
        for t in tiers:
            out = subprocess.run(
                [args.fak, "bench", args.model, "--tokens", str(args.tokens), "--decode", str(args.decode),
                 "--threads", str(args.threads), "--json"],
                env={**os.environ, "FAK_KERNEL_TIER": t}, check=True, capture_output=True, text=True).stdout
            j = json.loads(out)
            if j["kernel_tier"] != t:
                raise SystemExit(f"asked for tier {t}, fak ran {j['kernel_tier']}")
            for phase in ("prefill", "decode"):
                runs[t][phase].append(j[phase]["tokens_per_s"])
        print(f"round {r + 1}/{args.rounds}: " + "  ".join(
            f"{t} pp {runs[t]['prefill'][-1]:.1f} tg {runs[t]['decode'][-1]:.2f}" for t in tiers), flush=True)
    base = tiers[0]
    print(f"\n{os.path.basename(args.model)}: pp{args.tokens} / tg{args.decode}, {args.threads} thread(s), "
          f"median of {args.rounds} interleaved rounds (tok/s; ratio to {base})")
    for t in tiers:
        pp, tg = statistics.median(runs[t]["prefill"]), statistics.median(runs[t]["decode"])
        ppb, tgb = statistics.median(runs[base]["prefill"]), statistics.median(runs[base]["decode"])
        print(f"  {t:12s} prefill {pp:8.1f} ({pp / ppb:.2f}x)   decode {tg:7.2f} ({tg / tgb:.2f}x)   "
              f"[pp {min(runs[t]['prefill']):.1f}-{max(runs[t]['prefill']):.1f}, "
              f"tg {min(runs[t]['decode']):.2f}-{max(runs[t]['decode']):.2f}]")


if __name__ == "__main__":
    main()
