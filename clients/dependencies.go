package clients

// The dependencies these clients call, as the handler names them to the
// retry rule (messages.FailedIn) and in its reports of each call.
const (
	DependencyVMaaS     = "vmaas"
	DependencyInventory = "inventory"
)
