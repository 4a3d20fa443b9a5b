"""Building blocks of the input contracts: the strict base model, JSON objects, the Identifier and TextId types."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from eval_pipeline.contracts.identifiers import identifier_problem, text_id_problem

JsonObject = dict[str, Any]

# The JSON Schema form of identifier_problem, so exported files can be checked before they reach the pipeline.
IDENTIFIER_PATTERN = r"^(?!\s)(?!.*\s$)(?!.*\.\.)[^/\\\u0000-\u001f\u007f-\u009f]+$"


def check_identifier(value: str) -> str:
    """`value` when it is an identifier (a name, never a path), else a validation error saying why not."""
    problem = identifier_problem(value)
    if problem is not None:
        # the message template is fixed: a value holding braces must not be read as a placeholder
        raise PydanticCustomError("identifier", "{message}", {"message": f"{value!r} {problem}"})
    return value


# A run id or version string: it names a folder under the data root, so it is a name and never a path
# (docs/inputs.md#identifiers).
Identifier = Annotated[str, AfterValidator(check_identifier), Field(json_schema_extra={"pattern": IDENTIFIER_PATTERN})]


def _text_id(value: str) -> str:
    problem = text_id_problem(value)
    if problem is not None:
        raise PydanticCustomError("text_id", "{message}", {"message": f"{value!r} {problem}"})
    return value


# A case or trace id: free text shown in reports and naming case pages, so no character a reader would not see
# (bidirectional overrides, zero-width and other format or control characters).
TextId = Annotated[str, Field(min_length=1), AfterValidator(_text_id)]


class StrictModel(BaseModel):
    """Base: wrong types are rejected, never coerced; unknown fields are kept out of the model."""

    model_config = ConfigDict(strict=True, extra="ignore", populate_by_name=True)
