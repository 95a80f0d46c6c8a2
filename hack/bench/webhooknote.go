package main

// webhookProfile is issue 38's profile of section 2's path, written under
// its tables.
const webhookProfile = `### Where the webhook server's time goes (issue 38, 2026-12-03)

CPU and allocation profiles of the binary under this section's load
(` + "`--pprof-bind-address`" + `) and ` + "`BenchmarkHandler`" + `'s allocations, before and
after 6cb5c88, 294d99f and dc5840b (the answer written without
encoding/json, no ` + "`fmt.Errorf`" + ` per review, pooled skim buffers, pre-resolved
counters, no cascade walk for an object without dependents): 91 → 75
allocations per allowed review, 106 → 88 per denied one; in three pairs
of back-to-back runs of ` + "`bench -only webhook`" + ` (load 6-15), lockguard's CPU
per request 2.26× → 1.94× the bare server's (medians), while the
throughput ratio, 0.585 → 0.595, stayed within the noise: targets 2 (and
issue 38's 80%) are still missed. The profile, the figures, the commands
and what is left: [webhook-throughput.md](history/webhook-throughput.md).

`
