package main

// webhookProfile is issue 38's profile of section 2's path, written under
// its tables.
const webhookProfile = `### Where the webhook server's time goes (issue 38, 2026-12-03 to 12-05)

Profiles of the binary under this section's load (` + "`--pprof-bind-address`" + `)
and ` + "`BenchmarkHandler`" + ` led to 6cb5c88, 294d99f, dc5840b (the answer written
without encoding/json, pooled skim buffers, no cascade walk for an object
without dependents) and 54f0693, a1c65bb (the kept review decoded by hand,
` + "`sigs.k8s.io/json`" + ` only for the unusual): 91 → 54 allocations per allowed
review in process (54f0693 alone: 15.4 → 9.8 µs, side by side). In three
pairs of back-to-back runs of ` + "`bench -only webhook`" + ` (load 1.3-3.8), the
ratio went 0.58-0.62 → 0.67-0.70 with 54f0693 (0.74-0.77 at 9d6b2ff in two
more pairs); 052e456-1897eb3 (no query map, a lazy deadline timer,
shared strings, skim eight bytes at a time, the metrics' series resolved
once): 31 allocations per review, 0.77-0.92 in six pairs at e66ae3d
and 2f82f90 (b5d0fde 0.65-0.83 beside them). Issue 38's 80% is reached
in 7 of those 12 medians, not reliably. f0923b3-537eadb (skim's keys by a
compiled table, seven fewer allocations, the selector buckets in one read
of the store): 24 allocations in process, medians 0.76-0.87 in eight runs
of 8 rounds (13 of 16 at or over 0.80; 9da0b59 0.68-0.84 beside them, 9
of 16): still not reliably. 09af3fe (the review decoded in one pass:
0.4 µs less per review in process): 0.80-0.88 in five runs (10 of 10
at or over 0.80, three at 0.80 itself), ef07f05 0.77-0.88 beside them
(7 of 10); within the machine's noise. Over sessions 33-37, 51 of 90
medians at or over 0.80 (session 37, unchanged code on a slower day:
10 of 36, 0.74-0.87); in session 36, with nothing else on the VM,
0.76-0.81 where the bare server made at most 18,200 reviews/s and
0.84-0.90 where it made 18,600/s or more, but 0.82-0.95 beside a
CPU or memory hog at 13,300-17,022/s: not memory traffic. A
system-wide profile (perf) puts the review's decoding and decision at
about a tenth of lockguard's CPU each in the server; GOGC=200 for
lockguard alone looked like 0.04-0.06 more, the same for the bare server
too (the fair baseline) gave nothing. Without the decision, 0.09 more
(an upper bound); 3340cb6 decides the DELETE of an object of a namespace
holding no Lock (none pending) without the index's lookups or the
cascade walk: 0.75-0.89 in eight runs against d2fdcc7's 0.76-0.83
beside them (12 of 16 at or over 0.80, against 6 of 16). d33d8af
reads each string of the review once (a run of plain bytes ends at the
first flagged byte of its word, UTF-8 checked only where a string is not
all ASCII): 0.80-1.06 in twelve runs against 3340cb6's 0.76-0.91 beside
them (12 of 12 at or over 0.80, against 9 of 12; CPU per request 1.33
times the bare server's against 1.39, medians).
f90e99f read each TLS record's header apart from its body, one read
more per review (2.5-4.3% of lockguard's CPU in a profile); 421afbf
reads up to 8 KiB at a record's start where crypto/tls's buffer cannot
grow for it: 0.79-0.90 in four runs against 0eb9f78's 0.71-0.89
beside them (7 of 8 medians at or over 0.80 against 4 of 8; CPU per
request 1.30 times the bare server's against 1.43, medians). Both
servers make the same system calls per review (2.07 reads, 1.04
writes) in the same system time; lockguard's collector costs about 1.4
µs more per review (4 MB live against 2). 8867fbd and 289aa5e make five
allocations fewer per review (19 in process): 5 of 6 medians at or
over 0.80 in three runs, as 76ad59e's beside them (CPU per request 1.31
times the bare server's against 1.35, medians).
The profile, the figures, the commands and what is left:
[webhook-throughput.md](history/webhook-throughput.md).

`
