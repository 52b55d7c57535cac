package main

// The "schema" command: the protobuf wire schema of the types the embedded server decodes,
// read by reflection from the struct tags of k8s.io/api (the same field numbers and names
// upstream's generated.proto declares). Written as JSON; podstatus keeps a copy in
// src/podstatus/server/protobuf_schema.json and a test checks that copy is current.

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Roots: "group/version Kind" as it appears in a runtime.Unknown's TypeMeta.
var roots = map[string]reflect.Type{
	"v1/Pod":                       reflect.TypeOf(corev1.Pod{}),
	"v1/Node":                      reflect.TypeOf(corev1.Node{}),
	"v1/Namespace":                 reflect.TypeOf(corev1.Namespace{}),
	"v1/Binding":                   reflect.TypeOf(corev1.Binding{}),
	"v1/Event":                     reflect.TypeOf(corev1.Event{}),
	"v1/DeleteOptions":             reflect.TypeOf(metav1.DeleteOptions{}),
	"meta.k8s.io/v1/DeleteOptions": reflect.TypeOf(metav1.DeleteOptions{}),
	"policy/v1/Eviction":           reflect.TypeOf(policyv1.Eviction{}),
	"policy/v1/DeleteOptions":      reflect.TypeOf(metav1.DeleteOptions{}),
	"coordination.k8s.io/v1/Lease": reflect.TypeOf(coordinationv1.Lease{}),
	"events.k8s.io/v1/Event":       reflect.TypeOf(eventsv1.Event{}),
	// kubectl auth whoami / can-i.
	"authentication.k8s.io/v1/SelfSubjectReview":      reflect.TypeOf(authenticationv1.SelfSubjectReview{}),
	"authorization.k8s.io/v1/SelfSubjectAccessReview": reflect.TypeOf(authorizationv1.SelfSubjectAccessReview{}),
	"authorization.k8s.io/v1/SelfSubjectRulesReview":  reflect.TypeOf(authorizationv1.SelfSubjectRulesReview{}),
}

// Types whose JSON form is not their struct's: the decoder has a rule for each.
var special = map[reflect.Type]string{
	reflect.TypeOf(metav1.Time{}):          "time",
	reflect.TypeOf(metav1.MicroTime{}):     "microtime",
	reflect.TypeOf(metav1.Duration{}):      "duration",
	reflect.TypeOf(metav1.FieldsV1{}):      "rawjson",
	reflect.TypeOf(runtime.RawExtension{}): "rawjson",
	reflect.TypeOf(resource.Quantity{}):    "quantity",
	reflect.TypeOf(intstr.IntOrString{}):   "intorstring",
}

// field: [number, jsonName, kind, flags]; kind is a scalar name, "special:<rule>",
// "msg:<type>", or "map:<keykind>:<valuekind>"; flags: list, ptr, omitempty, inline.
type field []any

func typeName(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

func kindOf(t reflect.Type, todo *[]reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s, ok := special[t]; ok {
		return "special:" + s
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "int"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "uint"
	case reflect.Float32:
		return "float32"
	case reflect.Float64:
		return "float64"
	case reflect.Struct:
		*todo = append(*todo, t)
		return "msg:" + typeName(t)
	case reflect.Map:
		return "map:" + kindOf(t.Key(), todo) + ":" + kindOf(t.Elem(), todo)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "bytes"
		}
		// A list of lists (e.g. [][]string) is a message per inner list upstream; not served.
		return "unsupported"
	}
	return "unsupported"
}

func wireSchema() map[string]any {
	types := map[string]map[string]field{}
	var todo []reflect.Type
	rootNames := map[string]string{}
	for k, t := range roots {
		rootNames[k] = typeName(t)
		todo = append(todo, t)
	}
	for len(todo) > 0 {
		t := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		name := typeName(t)
		if _, done := types[name]; done {
			continue
		}
		fields := map[string]field{}
		types[name] = fields
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("protobuf")
			if tag == "" {
				continue
			}
			parts := strings.Split(tag, ",")
			num, err := strconv.Atoi(parts[1])
			if err != nil {
				panic(fmt.Sprintf("%s.%s: bad protobuf tag %q", name, f.Name, tag))
			}
			jsonTag := strings.Split(f.Tag.Get("json"), ",")
			jsonName := jsonTag[0]
			if jsonName == "-" {
				continue
			}
			flags := []string{}
			for _, opt := range jsonTag[1:] {
				if opt == "omitempty" || opt == "inline" {
					flags = append(flags, opt)
				}
			}
			if f.Anonymous && jsonName == "" {
				flags = append(flags, "inline")
			}
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				flags = append(flags, "ptr")
			}
			var kind string
			if ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8 {
				flags = append(flags, "list")
				kind = kindOf(ft.Elem(), &todo)
			} else {
				kind = kindOf(ft, &todo)
			}
			sort.Strings(flags)
			fields[strconv.Itoa(num)] = field{num, jsonName, kind, flags}
		}
	}
	return map[string]any{"roots": rootNames, "types": types}
}

func cmdSchema() int {
	out, err := json.MarshalIndent(wireSchema(), "", " ")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Stdout.Write(append(out, '\n'))
	return 0
}
