package luascripts

// AdminVersions walks a status index for the versions in flight (scripts/admin_versions.lua).
// Declared apart from args.go, and added to Schemas at init, so that the read-side additions stay
// out of the hot scripts' declarations.
var AdminVersions = &Schema{Op: "admin_versions", Args: []Arg{S("status"), S("cscore"), S("cmember"), N("limit")}}

func init() { Schemas[AdminVersions.Op] = AdminVersions }
