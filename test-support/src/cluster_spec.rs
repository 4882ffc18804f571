//! A generated Swagger 2.0 document shaped like a large cluster-management API (the
//! Kubernetes kind): API groups × versions × kinds, eleven operations per kind (list,
//! create, delete-collection, read, replace, patch, delete, status read/replace/patch,
//! watch), parameters shared through `#/parameters`, and definitions that share deep
//! sub-trees — a pod-template-like definition six levels deep that workload kinds all
//! reach, object metadata every kind reaches, and one self-recursive schema definition.
//! Flattening such a spec inlines the shared trees into every operation, which is
//! where an importer's memory goes; the corpus holds no licensed spec of this shape,
//! so the tests and the bench generate one (deterministically: the same bytes on every
//! machine, about 4 MB).

use serde_json::{Map, Value, json};

use crate::text::{MIXED_WORDS, Rng, prose};

/// API groups: (group, versions, kinds). The empty group is the core API (`/api/v1`).
const GROUPS: &[(&str, &[&str], &[&str])] = &[
    (
        "",
        &["v1"],
        &[
            "Pod",
            "Service",
            "ConfigMap",
            "Secret",
            "PersistentVolumeClaim",
            "ReplicationController",
            "ServiceAccount",
            "Endpoints",
        ],
    ),
    (
        "apps",
        &["v1"],
        &[
            "Deployment",
            "StatefulSet",
            "DaemonSet",
            "ReplicaSet",
            "ControllerRevision",
        ],
    ),
    ("batch", &["v1"], &["Job", "CronJob"]),
    (
        "autoscaling",
        &["v1", "v2", "v2beta2"],
        &["HorizontalPodAutoscaler"],
    ),
    (
        "networking.example.io",
        &["v1", "v1beta1"],
        &["Ingress", "NetworkPolicy", "IngressClass"],
    ),
    (
        "policy",
        &["v1", "v1beta1"],
        &["PodDisruptionBudget", "PodSecurityPolicy"],
    ),
    (
        "rbac.authorization.example.io",
        &["v1", "v1beta1", "v1alpha1"],
        &["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"],
    ),
    (
        "storage.example.io",
        &["v1", "v1beta1"],
        &["StorageClass", "CSIDriver", "CSINode", "VolumeAttachment"],
    ),
    ("coordination.example.io", &["v1"], &["Lease"]),
    (
        "discovery.example.io",
        &["v1", "v1beta1"],
        &["EndpointSlice"],
    ),
    ("events.example.io", &["v1", "v1beta1"], &["Event"]),
    (
        "apiextensions.example.io",
        &["v1"],
        &["CustomResourceDefinition"],
    ),
    ("scheduling.example.io", &["v1"], &["PriorityClass"]),
    (
        "admissionregistration.example.io",
        &["v1", "v1beta1"],
        &[
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
            "ValidatingAdmissionPolicy",
        ],
    ),
    (
        "certificates.example.io",
        &["v1"],
        &["CertificateSigningRequest"],
    ),
    (
        "resource.example.io",
        &["v1alpha3"],
        &["ResourceClaim", "ResourceClaimTemplate", "DeviceClass"],
    ),
    ("node.example.io", &["v1"], &["RuntimeClass"]),
    (
        "flowcontrol.example.io",
        &["v1beta3"],
        &["FlowSchema", "PriorityLevelConfiguration"],
    ),
];

/// Kinds whose spec holds a pod template (the deepest shared tree).
const WORKLOADS: &[&str] = &[
    "Pod",
    "ReplicationController",
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "Job",
    "CronJob",
];

/// Levels of the shared definition tree under the pod template, leaves first, and how
/// many definitions each level has.
const LEVELS: &[usize] = &[40, 28, 20, 14, 10, 6];

/// Query parameters every list or watch operation takes (shared via `#/parameters`).
const LIST_PARAMETERS: &[(&str, &str)] = &[
    ("allowWatchBookmarks", "boolean"),
    ("continue", "string"),
    ("fieldSelector", "string"),
    ("labelSelector", "string"),
    ("limit", "integer"),
    ("resourceVersion", "string"),
    ("resourceVersionMatch", "string"),
    ("sendInitialEvents", "boolean"),
    ("timeoutSeconds", "integer"),
    ("watch", "boolean"),
];

/// Query parameters of the operations that write (shared via `#/parameters`).
const WRITE_PARAMETERS: &[(&str, &str)] = &[
    ("dryRun", "string"),
    ("fieldManager", "string"),
    ("fieldValidation", "string"),
];

/// The generated document (Swagger 2.0), deterministic.
pub fn cluster_api_swagger() -> Value {
    let mut spec = Generator {
        rng: Rng(0x6b75_6265),
        definitions: Map::new(),
        paths: Map::new(),
        descriptions: 0,
    };
    spec.shared_definitions();
    for (group, versions, kinds) in GROUPS {
        for version in *versions {
            for kind in *kinds {
                spec.kind(group, version, kind);
            }
        }
    }
    let parameters: Map<String, Value> = LIST_PARAMETERS
        .iter()
        .chain(WRITE_PARAMETERS)
        .map(|(name, kind)| {
            (
                (*name).to_owned(),
                json!({"name": name, "in": "query", "type": kind, "uniqueItems": true,
                    "description": spec.describe(name, 160)}),
            )
        })
        .chain([
            (
                "body-delete".to_owned(),
                json!({"name": "body", "in": "body",
                    "schema": {"$ref": "#/definitions/meta.v1.DeleteOptions"}}),
            ),
            (
                "pretty".to_owned(),
                json!({"name": "pretty", "in": "query", "type": "string", "uniqueItems": true,
                    "description": "If 'true', then the output is pretty printed."}),
            ),
        ])
        .collect();
    json!({
        "swagger": "2.0",
        "info": {"title": "Cluster API (generated)", "version": "v1.31.0"},
        "host": "127.0.0.1:9",
        "basePath": "/",
        "schemes": ["http"],
        "consumes": ["application/json"],
        "produces": ["application/json", "application/yaml"],
        "securityDefinitions": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header"}},
        "security": [{"BearerToken": []}],
        "paths": spec.paths,
        "definitions": spec.definitions,
        "parameters": parameters,
    })
}

/// [`cluster_api_swagger`] as a spec file holds it: indented, as such specs are
/// published (about 4 MB).
pub fn cluster_api_swagger_text() -> String {
    serde_json::to_string_pretty(&cluster_api_swagger()).unwrap_or_default()
}

struct Generator {
    rng: Rng,
    definitions: Map<String, Value>,
    paths: Map<String, Value>,
    descriptions: u64,
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/definitions/{name}")})
}

impl Generator {
    /// A description about `n` bytes long, different each time, mentioning `what`.
    fn describe(&mut self, what: &str, n: usize) -> String {
        self.descriptions += 1;
        format!(
            "{what}: {}",
            prose(MIXED_WORDS, n, self.descriptions).replace('\n', " ")
        )
    }

    fn scalar(&mut self, name: &str) -> Value {
        let n = 100 + self.rng.below(250) as usize;
        let description = self.describe(name, n);
        match self.rng.below(6) {
            0 => json!({"type": "integer", "format": "int32", "description": description}),
            1 => json!({"type": "boolean", "description": description}),
            2 => json!({"type": "array", "items": {"type": "string"}, "description": description}),
            3 => json!({"type": "object", "additionalProperties": {"type": "string"},
                "description": description}),
            _ => json!({"type": "string", "description": description}),
        }
    }

    /// Object metadata, list metadata, status, delete options, patch, the label
    /// selector, the recursive schema definition, and the pod-template tree.
    fn shared_definitions(&mut self) {
        let leaf = |spec: &mut Self, name: &str, fields: &[&str]| {
            let properties: Map<String, Value> = fields
                .iter()
                .map(|field| ((*field).to_owned(), spec.scalar(field)))
                .collect();
            let description = spec.describe(name, 200);
            spec.definitions.insert(
                name.to_owned(),
                json!({"type": "object", "description": description, "properties": properties}),
            );
        };
        leaf(self, "meta.v1.FieldsV1", &[]);
        leaf(
            self,
            "meta.v1.OwnerReference",
            &[
                "apiVersion",
                "blockOwnerDeletion",
                "controller",
                "kind",
                "name",
                "uid",
            ],
        );
        leaf(self, "meta.v1.Preconditions", &["resourceVersion", "uid"]);
        leaf(
            self,
            "meta.v1.LabelSelectorRequirement",
            &["key", "operator", "values"],
        );
        leaf(self, "meta.v1.StatusCause", &["field", "message", "reason"]);
        leaf(
            self,
            "meta.v1.ListMeta",
            &[
                "continue",
                "remainingItemCount",
                "resourceVersion",
                "selfLink",
            ],
        );
        self.definitions.insert(
            "meta.v1.ManagedFieldsEntry".into(),
            json!({"type": "object", "properties": {
                "apiVersion": {"type": "string"}, "fieldsType": {"type": "string"},
                "fieldsV1": reference("meta.v1.FieldsV1"), "manager": {"type": "string"},
                "operation": {"type": "string"}, "subresource": {"type": "string"},
                "time": {"type": "string", "format": "date-time"}}}),
        );
        let description = self.describe("ObjectMeta", 300);
        let mut meta = Map::new();
        for field in [
            "annotations",
            "creationTimestamp",
            "deletionGracePeriodSeconds",
            "finalizers",
            "generateName",
            "generation",
            "labels",
            "name",
            "namespace",
            "resourceVersion",
            "uid",
        ] {
            meta.insert(field.into(), self.scalar(field));
        }
        meta.insert(
            "managedFields".into(),
            json!({"type": "array", "items": reference("meta.v1.ManagedFieldsEntry")}),
        );
        meta.insert(
            "ownerReferences".into(),
            json!({"type": "array", "items": reference("meta.v1.OwnerReference"),
                "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "uid"}),
        );
        self.definitions.insert(
            "meta.v1.ObjectMeta".into(),
            json!({"type": "object", "description": description, "properties": meta}),
        );
        self.definitions.insert(
            "meta.v1.LabelSelector".into(),
            json!({"type": "object", "properties": {
                "matchExpressions": {"type": "array", "items": reference("meta.v1.LabelSelectorRequirement")},
                "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}}}),
        );
        self.definitions.insert(
            "meta.v1.Status".into(),
            json!({"type": "object", "properties": {
                "code": {"type": "integer"}, "message": {"type": "string"},
                "reason": {"type": "string"}, "status": {"type": "string"},
                "details": {"type": "object", "properties": {
                    "causes": {"type": "array", "items": reference("meta.v1.StatusCause")},
                    "name": {"type": "string"}}},
                "metadata": reference("meta.v1.ListMeta")}}),
        );
        self.definitions.insert(
            "meta.v1.DeleteOptions".into(),
            json!({"type": "object", "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "dryRun": {"type": "array", "items": {"type": "string"}},
                "gracePeriodSeconds": {"type": "integer", "format": "int64"},
                "preconditions": reference("meta.v1.Preconditions"),
                "propagationPolicy": {"type": "string"}}}),
        );
        self.definitions.insert(
            "meta.v1.Patch".into(),
            json!({"type": "object", "description": "Patch is provided to give a concrete name and type to the request body."}),
        );
        // Self-recursive, as a custom resource's validation schema is.
        self.definitions.insert(
            "apiextensions.v1.JSONSchemaProps".into(),
            json!({"type": "object", "properties": {
                "type": {"type": "string"}, "description": {"type": "string"},
                "format": {"type": "string"}, "pattern": {"type": "string"},
                "required": {"type": "array", "items": {"type": "string"}},
                "items": reference("apiextensions.v1.JSONSchemaProps"),
                "not": reference("apiextensions.v1.JSONSchemaProps"),
                "allOf": {"type": "array", "items": reference("apiextensions.v1.JSONSchemaProps")},
                "properties": {"type": "object",
                    "additionalProperties": reference("apiextensions.v1.JSONSchemaProps")}}}),
        );
        // The pod-template tree: each level's definitions reach two to four of the
        // level below (and now and then one further down), so one top definition
        // reaches the whole tree, sharing its lower levels many times over.
        let mut below: Vec<String> = Vec::new();
        for (level, count) in LEVELS.iter().enumerate() {
            let mut this_level = Vec::new();
            for i in 0..*count {
                let name = format!("core.v1.Template{level}x{i}");
                let mut properties = Map::new();
                for f in 0..(4 + self.rng.below(5)) {
                    let field = format!("field{f}");
                    properties.insert(field.clone(), self.scalar(&field));
                }
                let links = if below.is_empty() {
                    0
                } else {
                    2 + self.rng.below(3)
                };
                for l in 0..links {
                    let target = below[self.rng.below(below.len() as u64) as usize].clone();
                    let item = reference(&target);
                    let field = format!("link{l}");
                    let value = if l % 2 == 0 {
                        json!({"type": "array", "items": item,
                            "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]})
                    } else {
                        item
                    };
                    properties.insert(field, value);
                }
                let description = self.describe(&name, 240);
                self.definitions.insert(
                    name.clone(),
                    json!({"type": "object", "description": description,
                        "required": ["field0"], "properties": properties}),
                );
                this_level.push(name);
            }
            // The next level links to this one (and, through it, further down).
            below = this_level;
        }
        let description = self.describe("PodTemplateSpec", 200);
        let tops: Vec<Value> = below.iter().map(|name| reference(name)).collect();
        self.definitions.insert(
            "core.v1.PodTemplateSpec".into(),
            json!({"type": "object", "description": description, "properties": {
                "metadata": reference("meta.v1.ObjectMeta"),
                "spec": {"allOf": [tops[0]], "description": "The pod's specification."},
                "overhead": {"type": "array", "items": tops[tops.len() - 1]}}}),
        );
    }

    /// A kind's definitions (object, spec, status, list) and its eleven operations.
    fn kind(&mut self, group: &str, version: &str, kind: &str) {
        let prefix = if group.is_empty() {
            format!("core.{version}")
        } else {
            format!("{}.{version}", group.split('.').next().unwrap_or(group))
        };
        let object = format!("{prefix}.{kind}");
        let mut spec = Map::new();
        for f in 0..(60 + self.rng.below(50)) {
            let field = format!("{}{f}", kind.to_lowercase());
            spec.insert(field.clone(), self.scalar(&field));
        }
        if WORKLOADS.contains(&kind) {
            spec.insert("template".into(), reference("core.v1.PodTemplateSpec"));
            spec.insert("selector".into(), reference("meta.v1.LabelSelector"));
        } else if kind == "CustomResourceDefinition" {
            spec.insert(
                "openAPIV3Schema".into(),
                reference("apiextensions.v1.JSONSchemaProps"),
            );
        } else {
            // Another kind reaches a middle part of the shared tree.
            let level = self.rng.below(2);
            let count = LEVELS[level as usize] as u64;
            let target = format!("core.v1.Template{level}x{}", self.rng.below(count));
            spec.insert("config".into(), reference(&target));
        }
        let description = self.describe(kind, 400);
        self.definitions.insert(
            format!("{object}Spec"),
            json!({"type": "object", "description": description, "properties": spec}),
        );
        let mut status = Map::new();
        for f in 0..(3 + self.rng.below(4)) {
            let field = format!("observed{f}");
            status.insert(field.clone(), self.scalar(&field));
        }
        status.insert(
            "conditions".into(),
            json!({"type": "array", "items": {"type": "object", "required": ["type", "status"],
                "properties": {"type": {"type": "string"}, "status": {"type": "string"},
                    "reason": {"type": "string"}, "message": {"type": "string"},
                    "lastTransitionTime": {"type": "string", "format": "date-time"}}}}),
        );
        self.definitions.insert(
            format!("{object}Status"),
            json!({"type": "object", "properties": status}),
        );
        let description = self.describe(kind, 300);
        self.definitions.insert(
            object.clone(),
            json!({"type": "object", "description": description,
                "x-kubernetes-group-version-kind": [{"group": group, "kind": kind, "version": version}],
                "properties": {
                    "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                    "metadata": reference("meta.v1.ObjectMeta"),
                    "spec": reference(&format!("{object}Spec")),
                    "status": reference(&format!("{object}Status"))}}),
        );
        self.definitions.insert(
            format!("{object}List"),
            json!({"type": "object", "required": ["items"], "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "items": {"type": "array", "items": reference(&object)},
                "metadata": reference("meta.v1.ListMeta")}}),
        );
        self.operations(group, version, kind, &object);
    }

    fn operations(&mut self, group: &str, version: &str, kind: &str, object: &str) {
        let root = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let plural = format!("{}s", kind.to_lowercase());
        let tag = format!(
            "{}{}",
            group
                .split('.')
                .next()
                .filter(|g| !g.is_empty())
                .unwrap_or("core"),
            capitalized(version)
        );
        let id = |verb: &str, scope: &str, suffix: &str| {
            format!("{verb}{}{scope}{kind}{suffix}", capitalized(&tag))
        };
        let shared = |names: &[(&str, &str)]| -> Vec<Value> {
            names
                .iter()
                .map(|(name, _)| json!({"$ref": format!("#/parameters/{name}")}))
                .collect()
        };
        let list_params = shared(LIST_PARAMETERS);
        let write_params = shared(WRITE_PARAMETERS);
        let writes = |first: Value| -> Vec<Value> {
            std::iter::once(first)
                .chain(write_params.iter().cloned())
                .collect()
        };
        let delete_collection: Vec<Value> =
            std::iter::once(json!({"$ref": "#/parameters/body-delete"}))
                .chain(list_params.iter().cloned())
                .collect();
        let body = |schema: &str| {
            json!({"name": "body", "in": "body", "required": true,
            "schema": reference(schema)})
        };
        let ok = |schema: &str| {
            json!({"200": {"description": "OK", "schema": reference(schema)},
            "401": {"description": "Unauthorized"}})
        };
        let created = |schema: &str| {
            json!({
            "200": {"description": "OK", "schema": reference(schema)},
            "201": {"description": "Created", "schema": reference(schema)},
            "202": {"description": "Accepted", "schema": reference(schema)},
            "401": {"description": "Unauthorized"}})
        };
        let patch_types = json!([
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
            "application/apply-patch+yaml"
        ]);
        let describe = |spec: &mut Self, what: &str| spec.describe(&format!("{what} {kind}"), 200);
        let namespace = json!({"name": "namespace", "in": "path", "required": true,
            "type": "string", "description": "object name and auth scope, such as for teams and projects"});
        let name = json!({"name": "name", "in": "path", "required": true, "type": "string",
            "description": format!("name of the {kind}")});
        let tags = json!([tag]);

        let collection = format!("{root}/namespaces/{{namespace}}/{plural}");
        let list_description = describe(self, "list or watch objects of kind");
        let create_description = describe(self, "create a");
        let delete_all_description = describe(self, "delete collection of");
        self.paths.insert(
            collection,
            json!({
                "parameters": [namespace, {"$ref": "#/parameters/pretty"}],
                "get": {"operationId": id("list", "Namespaced", ""), "description": list_description,
                    "tags": tags, "parameters": list_params, "responses": ok(&format!("{object}List"))},
                "post": {"operationId": id("create", "Namespaced", ""), "description": create_description,
                    "tags": tags, "parameters": writes(body(object)),
                    "responses": created(object)},
                "delete": {"operationId": id("deletecollection", "Namespaced", ""),
                    "description": delete_all_description, "tags": tags,
                    "parameters": delete_collection,
                    "responses": ok("meta.v1.Status")},
            }),
        );
        let item = format!("{root}/namespaces/{{namespace}}/{plural}/{{name}}");
        // Read, replace and patch of the object (`suffix` ""), or of its status.
        let read_write = |spec: &mut Self, suffix: &str, of: &str| {
            let read = describe(spec, &format!("read {of}the specified"));
            let replace = describe(spec, &format!("replace {of}the specified"));
            let patch = describe(spec, &format!("partially update {of}the specified"));
            json!({
                "parameters": [name, namespace, {"$ref": "#/parameters/pretty"}],
                "get": {"operationId": id("read", "Namespaced", suffix), "description": read,
                    "tags": tags, "responses": ok(object)},
                "put": {"operationId": id("replace", "Namespaced", suffix), "description": replace,
                    "tags": tags, "parameters": writes(body(object)),
                    "responses": created(object)},
                "patch": {"operationId": id("patch", "Namespaced", suffix), "description": patch,
                    "tags": tags, "consumes": patch_types,
                    "parameters": writes(body("meta.v1.Patch")),
                    "responses": created(object)},
            })
        };
        let mut object_item = read_write(self, "", "");
        object_item["delete"] = json!({"operationId": id("delete", "Namespaced", ""),
            "description": describe(self, "delete a"), "tags": tags,
            "parameters": [{"$ref": "#/parameters/body-delete"}],
            "responses": ok("meta.v1.Status")});
        self.paths.insert(item.clone(), object_item);
        let status_item = read_write(self, "Status", "status of ");
        self.paths.insert(format!("{item}/status"), status_item);
        let all_description = describe(self, "list objects of kind");
        self.paths.insert(
            format!("{root}/{plural}"),
            json!({"get": {"operationId": id("list", "", "ForAllNamespaces"),
                "description": all_description, "tags": tags,
                "parameters": list_params.clone(), "responses": ok(&format!("{object}List"))}}),
        );
        let watch_description = describe(self, "watch individual changes to a list of");
        self.paths.insert(
            format!("{root}/watch/namespaces/{{namespace}}/{plural}"),
            json!({
                "parameters": [namespace, {"$ref": "#/parameters/pretty"}],
                "get": {"operationId": id("watch", "Namespaced", "List"),
                "description": watch_description, "tags": tags,
                "parameters": list_params, "responses": ok("meta.v1.Status")}}),
        );
    }
}

fn capitalized(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_deterministic_and_about_four_megabytes() {
        // Written indented, as such specs are published.
        let a = serde_json::to_string_pretty(&cluster_api_swagger()).unwrap_or_default();
        assert_eq!(
            a,
            serde_json::to_string_pretty(&cluster_api_swagger()).unwrap_or_default()
        );
        assert!(
            (3_500_000..5_000_000).contains(&a.len()),
            "{} bytes",
            a.len()
        );
    }
}
