// Package hook is the removal-after-drain flow of a control-plane Machine's etcd member as an API
// over plain data, for a control-plane provider that removes members itself (embeds the flow)
// instead of leaving it to the etcd-adapter manager:
//
//   - placing the provider's own pre-terminate hook on every control-plane Machine (NeedsHook,
//     Place), so any deletion drains the Node before the member goes;
//   - knowing when the hook may act (MayAct): the Machine is deleting, Cluster API has drained
//     it (its Deleting condition's reason is WaitingForPreTerminateHook) and no other
//     pre-terminate hook is left but the known ones that themselves run last (OrderBefore);
//   - one step of the removal per call (Flow.Step): quorum re-checked on a fresh observation
//     right before the destructive call, leadership moved off first, the member removed by its
//     identity, the hook released once no member of the Machine is left; a removal etcd (or K3s)
//     rejects keeps the hook and says why until a person asks for a retry (the stopped request
//     is withdrawn first) or releases the hook;
//   - EmbeddedRemovalAnnotation, which the provider sets on its control-plane object so the
//     etcd-adapter manager observes that Cluster only and orders its hook before the
//     provider's: never two removers, never two hooks waiting for each other.
//
// Acting goes through the caller: etcd.Cluster (a backend) removes members, and a PatchFunc
// patches the Machine's annotations, so no Kubernetes client library is needed here.
package hook
