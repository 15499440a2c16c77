package provider

import (
	"context"
	"fmt"
)

// GetInstanceTreeOf walks ListChildren breadth-first from root: duroxide's default
// get_instance_tree. The result lists root first.
func GetInstanceTreeOf(ctx context.Context, a Admin, root string) (InstanceTree, error) {
	all := []string{root}
	seen := map[string]bool{root: true}
	for i := 0; i < len(all); i++ {
		children, err := a.ListChildren(ctx, all[i])
		if err != nil {
			return InstanceTree{}, err
		}
		for _, c := range children {
			if !seen[c] { // a cycle cannot be stored, but never loop forever on bad data
				seen[c] = true
				all = append(all, c)
			}
		}
	}
	return InstanceTree{RootID: root, AllIDs: all}, nil
}

// DeleteInstanceTree is duroxide's default delete_instance: it refuses sub-orchestrations
// (delete their root instead), collects the tree and deletes it with DeleteInstancesAtomic.
func DeleteInstanceTree(ctx context.Context, a Admin, instance string, force bool) (DeleteInstanceResult, error) {
	const op = "delete_instance"
	parent, hasParent, err := a.GetParentID(ctx, instance)
	if err != nil {
		return DeleteInstanceResult{}, err
	}
	if hasParent {
		return DeleteInstanceResult{}, NewPermanentError(op, fmt.Sprintf(
			"instance %q is a sub-orchestration of %q: delete the root instance instead", instance, parent)).
			WithKind(ErrInvalidInput)
	}
	tree, err := a.GetInstanceTree(ctx, instance)
	if err != nil {
		return DeleteInstanceResult{}, err
	}
	return a.DeleteInstancesAtomic(ctx, tree.AllIDs, force)
}
