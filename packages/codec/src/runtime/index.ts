// The generic runtime every generated frame module uses. Nothing frame-specific lives here.
export { DecodeError, EncodeError, type ErrorDetail } from "./errors.js";
export { readU16, readU32, readU64, writeU16, writeU32, writeU64, checkInt, checkU64, checkBytes, checkU16Length, toHex, fromHex } from "./bytes.js";
export { readUtf8, encodeUtf8, firstInvalidUtf8 } from "./utf8.js";
export { readJson, encodeJson, encodeJsonAfter, JsonFailure, checkStringMap, checkObject, describeJsonError, findJsonProblem } from "./json.js";
export type { DecodeOptions, TypeCheck } from "./options.js";
export { PostcardReader, PostcardWriter, PostcardFailure, POSTCARD_MAX_DEPTH } from "./postcard.js";
