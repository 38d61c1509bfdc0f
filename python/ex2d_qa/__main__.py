# SPDX-License-Identifier: BSD-3-Clause
"""python3 -m ex2d_qa (what ``ex2dctl qa`` runs): see --help."""

import argparse
import os
import sys
import time

from .fleet import Fleet

# ex2dctl's exit code for an output that cannot be written
# (common/src/core/include/ex2d/exit_codes.hpp; a bad command line exits 2 through argparse, any
# other failure 1).
EXIT_OUTPUT = 4


def parse(argv):
    p = argparse.ArgumentParser(
        prog="ex2dctl qa",
        description="Write one self-contained HTML QA report of frame files: an exposure, a "
                    "night or a campaign (several nights), with the fleet's state and timings "
                    "from Redis where ex2dctl reaches it. Missing or unreadable frames are "
                    "flagged FAIL with the reason; the report is written all the same.")
    p.add_argument("inputs", nargs="+", metavar="PATH",
                   help="frame files, exposure folders (SPECPROD/exposures/NIGHT/EXPID), night "
                        "folders, or any folder above them (searched for frame-CAM-EXPID.fits"
                        "[.gz])")
    p.add_argument("-o", "--output", required=True, help="HTML file to write")
    p.add_argument("--cameras", help="cameras every exposure should have, e.g. b0,r0,z0 or "
                                     "all (b0..z9); a missing one is FAIL")
    p.add_argument("--campaign", default="nightly",
                   help="campaign of the exposures in the fleet (default nightly)")
    p.add_argument("--detail", default="30",
                   help="frames shown with figures: a number (flagged frames first, then the "
                        "latest exposures; default 30) or all")
    p.add_argument("--jobs", type=int, default=0,
                   help="processes reading frames (default: the CPUs, at most 4)")
    p.add_argument("--no-fleet", action="store_true", help="do not ask the fleet's Redis")
    p.add_argument("--no-timelines", action="store_true",
                   help="no timeline figure per exposure")
    p.add_argument("--title", help="page title")
    g = p.add_argument_group("passed by ex2dctl qa")
    g.add_argument("--ex2dctl", help="ex2dctl program for the fleet's state")
    for opt in ("--config", "--redis-host", "--redis-port", "--namespace"):
        g.add_argument(opt)
    return p.parse_args(argv)


def cameras(text):
    if not text:
        return None
    if text == "all":
        return ["%s%d" % (arm, petal) for arm in "brz" for petal in range(10)]
    return [c.strip() for c in text.split(",") if c.strip()]


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    ctl_args = []
    for opt in ("config", "redis_host", "redis_port", "namespace"):
        value = getattr(args, opt)
        if value:
            ctl_args += ["--" + opt.replace("_", "-"), value]
    fleet = Fleet(None if args.no_fleet else args.ex2dctl, ctl_args)
    if args.no_fleet:
        fleet.unavailable = "not asked (--no-fleet)"
    detail = None if args.detail == "all" else int(args.detail)
    from .report import Report
    t0 = time.time()
    report = Report(args.inputs, cameras=cameras(args.cameras), campaign=args.campaign,
                    fleet=fleet, detail=detail, processes=args.jobs or None,
                    timelines=not args.no_timelines).build()
    try:
        path = report.write(os.path.abspath(args.output), args.title)
    except OSError as e:
        print("ex2dctl qa: cannot write %s: %s" % (args.output, e.strerror or e), file=sys.stderr)
        return EXIT_OUTPUT
    frames = list(report.all_frames())
    counts = {flag: sum(1 for f in frames if f.flag == flag) for flag in ("PASS", "WARN", "FAIL")}
    print("QA report %s: %d frame(s), PASS %d, WARN %d, FAIL %d, in %.1f s" % (
        path, len(frames), counts["PASS"], counts["WARN"], counts["FAIL"], time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
