// The generic runtime every generated frame module uses. Nothing frame-specific lives here.
export { DecodeError, EncodeError, type ErrorDetail } from "./errors.js";
export { readU16, readU32, writeU16, writeU32, checkInt, checkBytes, checkU16Length, toHex, fromHex } from "./bytes.js";
export { readUtf8, encodeUtf8, firstInvalidUtf8 } from "./utf8.js";
export { readJson, encodeJson, encodeJsonAfter, JsonFailure, checkStringMap, checkObject, describeJsonError, findJsonProblem } from "./json.js";
export type { DecodeOptions, TypeCheck } from "./options.js";
