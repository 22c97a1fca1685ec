// JSON Schema → GBNF: the subset OpenAI structured outputs use, as a grammar whose sentences are
// JSON documents that validate against the schema.
//
// Supported (docs/grammar.md): `type` (object, array, string, number, integer, boolean, null, or a
// list of them), `properties` + `required` (members in the order `required` lists them — the
// declaration order in pydantic's and OpenAI's strict schemas — then optional ones by name, each
// of which may be left out), `additionalProperties` (false; true or absent: only the listed properties are
// generated; a schema with no `properties`: a map of string keys to it), `enum`, `const`,
// `items` + `minItems`/`maxItems`, `minLength`/`maxLength`, `format` date, time, date-time and
// uuid, `anyOf`, `allOf` of one schema, `$ref` to `#`, `#/$defs/...` or `#/definitions/...`
// (recursion becomes recursive rules), and an empty schema (any JSON value). Annotations (title,
// description, default, examples, $schema, $id, $comment, deprecated, readOnly, writeOnly) are
// ignored. Anything else (`pattern`, `minimum`, `oneOf`, ...) is InvalidArgument naming the keyword
// and where in the schema it is, never silently dropped. Whitespace between tokens is bounded
// (at most 20 characters per gap) and numbers have at most 16 digits per part, so a model cannot
// run on forever inside the grammar.
#ifndef FAK_GRAMMAR_JSON_SCHEMA_H_
#define FAK_GRAMMAR_JSON_SCHEMA_H_

#include <string>
#include <string_view>

#include "fak/core/export.h"
#include "fak/core/status.h"

namespace fak {

// GBNF (start rule `root`) for the JSON text of a schema. InvalidArgument for malformed JSON, a
// schema that is not an object or boolean, unsupported keywords, unresolved references, or
// nesting deeper than 64.
FAK_EXPORT Result<std::string> JsonSchemaToGbnf(std::string_view schema_json);

// GBNF for any JSON object (response_format {"type": "json_object"}).
FAK_EXPORT std::string JsonObjectGbnf();

}  // namespace fak

#endif  // FAK_GRAMMAR_JSON_SCHEMA_H_
