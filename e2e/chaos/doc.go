// Package chaos holds lockguard's chaos run (make chaos): a local control
// plane, two lockguard replicas behind a TCP load balancer, clients that
// create and delete Locks and try to delete locked and unlocked objects,
// and faults (SIGKILLed replicas, kube-apiserver restarts, leader changes,
// serving-certificate rotations), checked by an invariant checker: no
// object is ever deleted while a Lock the client saw created protects it.
// Two more tests: restarts_test.go restarts kube-apiserver four times in
// under a minute and times a new Lock to active; brokenkind_test.go starts
// lockguard beside a kind of the group whose list always fails. The tests are behind the
// build tag chaos; see chaos_test.go.
package chaos
