// A form generated from a JSON Schema (a human task's output contract):
// objects → fieldsets, arrays → repeatable groups, enums → selects,
// numbers → number inputs, booleans → checkboxes, strings → text inputs.
// Every field carries its JSON path (`$.output.facet.items[0].name`, the
// server's own notation) so a 422's `details.errors[].path` lands next to it.
// The browser's own validation is off: the server's contract decides.

function make(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  node.append(...children);
  return node;
}

function fieldName(path) { return path.replace(/^\$\.output\.?/, "") || "output"; }

/**
 * One schema from an `allOf` (a compiled contract narrows a facet's schema
 * with the caller's that way): types, enums and items from the first part
 * that has them, properties merged, `required` joined.
 */
export function merged(schema) {
  if (!schema || typeof schema !== "object" || !Array.isArray(schema.allOf)) return schema || {};
  const { allOf, ...own } = schema;
  const parts = [own, ...allOf.map(merged)];
  const result = {};
  for (const part of parts) {
    for (const [key, value] of Object.entries(part)) {
      if (key === "properties") {
        result.properties = result.properties || {};
        for (const [name, child] of Object.entries(value)) {
          result.properties[name] = result.properties[name] ? merged({ allOf: [result.properties[name], child] }) : child;
        }
      } else if (key === "required") {
        result.required = [...new Set([...(result.required || []), ...value])];
      } else if (!(key in result)) {
        result[key] = value;
      }
    }
  }
  return result;
}

/** Builds the editor of `schema` at `path`; returns {element, read()}. */
function editor(rawSchema, path, title, required) {
  const schema = merged(rawSchema);
  const label = `${title}${required ? " *" : ""}`;
  const help = schema.description ? make("small", {}, schema.description) : "";
  if (schema.type === "object" || schema.properties) {
    const fieldset = make("fieldset", { "data-path": path }, make("legend", {}, label));
    if (help) fieldset.append(help);
    fieldset.append(make("div", { class: "field-error", role: "alert" }));
    const needed = new Set(schema.required || []);
    const children = Object.entries(schema.properties || {}).map(([name, child]) => {
      const built = editor(child, `${path}.${name}`, name, needed.has(name));
      fieldset.append(built.element);
      return [name, built];
    });
    return {
      element: fieldset,
      read() {
        const value = {};
        for (const [name, built] of children) {
          const read = built.read();
          if (read !== undefined) value[name] = read;
        }
        return value;
      },
    };
  }
  if (schema.type === "array") {
    const items = schema.items || { type: "string" };
    const fieldset = make("fieldset", { "data-path": path }, make("legend", {}, label));
    if (help) fieldset.append(help);
    fieldset.append(make("div", { class: "field-error", role: "alert" }));
    const list = make("div", { class: "items" });
    const entries = [];
    const add = make("button", { type: "button", class: "add-item", "data-path": `${path}[+]` }, `Add ${title}`);
    const renumber = () => entries.forEach((entry, index) => entry.retitle(index));
    add.addEventListener("click", () => {
      const index = entries.length;
      const holder = make("div", { class: "item" });
      let built = editor(items, `${path}[${index}]`, `${title} ${index + 1}`, false);
      const remove = make("button", { type: "button", class: "remove-item" }, "Remove");
      const entry = {
        read: () => built.read(),
        retitle(position) {
          // Paths follow positions, so the server's `[n]` finds the right item.
          const value = built.read();
          holder.replaceChildren();
          built = editor(items, `${path}[${position}]`, `${title} ${position + 1}`, false);
          holder.append(built.element, remove);
          fill(built.element, value);
        },
      };
      remove.addEventListener("click", () => {
        entries.splice(entries.indexOf(entry), 1);
        holder.remove();
        renumber();
      });
      holder.append(built.element, remove);
      entries.push(entry);
      list.append(holder);
    });
    fieldset.append(list, add);
    return { element: fieldset, read: () => entries.map((entry) => entry.read()) };
  }
  const id = `field-${path.replace(/[^a-zA-Z0-9]+/g, "-")}`;
  let input;
  if (Array.isArray(schema.enum)) {
    input = make("select", { id, name: fieldName(path), "data-path": path },
      make("option", { value: "" }, "—"),
      ...schema.enum.map((choice) => make("option", { value: JSON.stringify(choice) }, String(choice))));
  } else if (schema.type === "boolean") {
    input = make("input", { id, type: "checkbox", name: fieldName(path), "data-path": path });
  } else if (schema.type === "number" || schema.type === "integer") {
    input = make("input", { id, type: "number", step: "any", name: fieldName(path), "data-path": path });
  } else {
    input = make("input", { id, type: "text", name: fieldName(path), "data-path": path });
  }
  const field = make("div", { class: "field" }, make("label", { for: id }, label), input);
  if (help) field.append(help);
  field.append(make("div", { class: "field-error", role: "alert" }));
  return {
    element: field,
    read() {
      if (input.type === "checkbox") return input.checked;
      if (input.value === "") return required ? (schema.type === "string" ? "" : undefined) : undefined;
      if (input.tagName === "SELECT") return JSON.parse(input.value);
      if (input.type === "number") return Number(input.value);
      return input.value;
    },
  };
}

/** Puts `value`'s scalars back into a rebuilt editor (after renumbering). */
function fill(element, value) {
  const fields = element.querySelectorAll("[data-path]");
  const root = element.getAttribute("data-path");
  for (const field of fields) {
    if (!("value" in field) || field.tagName === "BUTTON") continue;
    const relative = field.getAttribute("data-path").slice(root.length);
    const found = relative.split(/\.|\[|\]/).filter(Boolean).reduce((at, key) => (at == null ? at : at[key]), value);
    if (found === undefined) continue;
    if (field.type === "checkbox") field.checked = Boolean(found);
    else if (field.tagName === "SELECT") field.value = JSON.stringify(found);
    else field.value = String(found);
  }
}

/** The form of `outputSchema`; `read()` gives the output object. */
export function schemaForm(outputSchema) {
  const built = editor(outputSchema, "$.output", "output", true);
  return built;
}

function parentPath(path) {
  const match = /^(.*)(\.[^.[\]]+|\[\d+\])$/.exec(path);
  return match ? match[1] : null;
}

/**
 * Shows each `{path, message}` next to the field with that path, else the
 * nearest enclosing one (a missing property is reported on its parent).
 */
export function showErrors(container, errors) {
  for (const slot of container.querySelectorAll(".field-error")) slot.textContent = "";
  const byPath = (path) => [...container.querySelectorAll("[data-path]")]
    .find((node) => node.getAttribute("data-path") === path && node.tagName !== "BUTTON");
  for (const error of errors) {
    const missing = /^"([^"]+)" is a required property/.exec(error.message || "");
    let target = null;
    for (let path = missing ? `${error.path}.${missing[1]}` : error.path; path && !target; path = parentPath(path)) {
      target = byPath(path);
    }
    const holder = target ? target.closest(".field, fieldset") : null;
    const slot = holder ? holder.querySelector(":scope > .field-error") : container.querySelector(".field-error");
    const line = `${error.path}: ${error.message}`;
    if (slot) slot.textContent = slot.textContent ? `${slot.textContent}\n${line}` : line;
    if (target) target.setAttribute("aria-invalid", "true");
  }
}
