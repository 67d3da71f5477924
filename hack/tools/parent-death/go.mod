// Module parent-death builds the exec wrapper through which the test environment starts
// kube-apiserver and etcd, so that they end with the test process that started them. It uses
// the standard library only.
module github.com/etcd-adapter/etcd-adapter/hack/tools/parent-death

go 1.26.0
