// A form generated from a JSON Schema (a human task's output contract):
// objects → fieldsets, arrays → repeatable groups, enums → selects,
// numbers → number inputs, booleans → checkboxes, strings → text inputs.
// Every field carries its JSON path (`$.output.facet.items[0].name`, the
// server's own notation) so a 422's `details.errors[].path` lands next to it.
// The browser's own validation is off: the server's contract decides.
//
// A facet whose registry definition names a widget (a task's `widgets`) is
// edited with it instead: `longText` (a text area with a character count),
// `choice` (radio buttons, or check boxes for a list), `tags` (a list of
// strings typed comma-separated), `cards` (a list of objects, each a card
// titled by one of its fields), `scoreTable` (an object's numbers as rows)
// and `fields` (an object whose properties name their own widgets). A kind
// this viewer does not know falls back to the generic editor. Widgets keep
// the same `data-path`s, so errors land the same way.

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

/** A field: its label, the input, help and the error slot. */
function labelled(id, label, input, help) {
  const field = make("div", { class: "field" }, make("label", { for: id }, label), input);
  if (help) field.append(help);
  field.append(make("div", { class: "field-error", role: "alert" }));
  return field;
}

function inputId(path) { return `field-${path.replace(/[^a-zA-Z0-9]+/g, "-")}`; }

/** The widgets by kind: each builds {element, read()} or null (does not fit). */
const WIDGETS = {
  longText(schema, path, label, required, help, widget) {
    if (schema.type !== "string") return null;
    const id = inputId(path);
    const area = make("textarea", { id, rows: String(widget.rows || 4), name: fieldName(path), "data-path": path });
    const count = make("small", { class: "char-count" }, "0 characters");
    area.addEventListener("input", () => { count.textContent = `${[...area.value].length} characters`; });
    const field = labelled(id, label, area, help);
    field.classList.add("widget-long-text");
    field.insertBefore(count, area.nextSibling);
    return { element: field, read: () => (area.value === "" && !required ? undefined : area.value) };
  },
  choice(schema, path, label, required, help) {
    const many = schema.type === "array";
    const choices = many ? merged(schema.items).enum : schema.enum;
    if (!Array.isArray(choices)) return null;
    const group = make("fieldset", { class: "widget-choice", "data-path": path, role: many ? "group" : "radiogroup" },
      make("legend", {}, label));
    if (help) group.append(help);
    group.append(make("div", { class: "field-error", role: "alert" }));
    const boxes = choices.map((choice, index) => {
      const id = `${inputId(path)}-${index}`;
      const box = make("input", { id, type: many ? "checkbox" : "radio", name: fieldName(path), value: JSON.stringify(choice) });
      group.append(make("label", { class: "choice", for: id }, box, ` ${choice}`));
      return box;
    });
    return {
      element: group,
      read() {
        const picked = boxes.filter((box) => box.checked).map((box) => JSON.parse(box.value));
        if (many) return picked.length || required ? picked : undefined;
        return picked.length ? picked[0] : undefined;
      },
    };
  },
  tags(schema, path, label, required, help) {
    if (schema.type !== "array") return null;
    const id = inputId(path);
    const input = make("input", { id, type: "text", name: fieldName(path), "data-path": path, placeholder: "one, two, three" });
    const field = labelled(id, label, input, help);
    field.classList.add("widget-tags");
    return {
      element: field,
      read() {
        const tags = input.value.split(",").map((tag) => tag.trim()).filter(Boolean);
        return tags.length || required ? tags : undefined;
      },
    };
  },
  cards(schema, path, label, required, help, widget, title) {
    if (schema.type !== "array") return null;
    const built = editor(schema, path, title, required, { kind: "generic" });
    built.element.classList.add("widget-cards");
    const retitle = () => {
      for (const item of built.element.querySelectorAll(":scope > .items > .item")) {
        item.classList.add("widget-card");
        const named = widget.cardTitle ? item.querySelector(`[data-path$=".${widget.cardTitle}"]`) : null;
        let header = item.querySelector(":scope > .card-title");
        if (!header) {
          header = make("header", { class: "card-title" });
          item.prepend(header);
        }
        header.textContent = named && named.value ? named.value : "(untitled)";
      }
    };
    built.element.addEventListener("click", () => queueMicrotask(retitle));
    built.element.addEventListener("input", retitle);
    return built;
  },
  scoreTable(schema, path, label, required, help) {
    if (!schema.properties) return null;
    const fieldset = make("fieldset", { class: "widget-score-table", "data-path": path }, make("legend", {}, label));
    if (help) fieldset.append(help);
    fieldset.append(make("div", { class: "field-error", role: "alert" }));
    const table = make("table", {}, make("tr", {}, make("th", {}, "score"), make("th", {}, "value"), make("th", {}, "range")));
    const needed = new Set(schema.required || []);
    const rows = [];
    const others = [];
    for (const [name, raw] of Object.entries(schema.properties)) {
      const child = merged(raw);
      const childPath = `${path}.${name}`;
      if (child.type === "number" || child.type === "integer") {
        const id = inputId(childPath);
        const input = make("input", { id, type: "number", step: "any", min: child.minimum, max: child.maximum, name: fieldName(childPath), "data-path": childPath });
        const range = `${child.minimum ?? ""}–${child.maximum ?? ""}`;
        const cell = make("td", {}, input, make("div", { class: "field-error", role: "alert" }));
        table.append(make("tr", { class: "field" }, make("td", {}, make("label", { for: id }, `${name}${needed.has(name) ? " *" : ""}`)), cell, make("td", {}, range)));
        rows.push([name, () => (input.value === "" ? undefined : Number(input.value))]);
      } else {
        const built = editor(child, childPath, name, needed.has(name));
        others.push(built.element);
        rows.push([name, built.read]);
      }
    }
    fieldset.append(table, ...others);
    return {
      element: fieldset,
      read() {
        const value = {};
        for (const [name, read] of rows) {
          const found = read();
          if (found !== undefined) value[name] = found;
        }
        return value;
      },
    };
  },
  fields(schema, path, label, required, help, widget, title) {
    if (!schema.properties) return null;
    return editor(schema, path, title, required, { kind: "generic", fields: widget.fields || {} });
  },
};

/**
 * Builds the editor of `schema` at `path`; returns {element, read()}.
 * `widget` (a facet's, or a field's of a `fields` widget) picks a widget.
 */
function editor(rawSchema, path, title, required, widget) {
  const schema = merged(rawSchema);
  const label = `${title}${required ? " *" : ""}`;
  const help = schema.description ? make("small", {}, schema.description) : "";
  const build = widget && WIDGETS[widget.kind];
  if (build) {
    const built = build(schema, path, label, required, help, widget, title);
    if (built) {
      built.element.setAttribute("data-widget", widget.kind);
      return built;
    }
  }
  if (schema.type === "object" || schema.properties) {
    const fieldset = make("fieldset", { "data-path": path }, make("legend", {}, label));
    if (help) fieldset.append(help);
    fieldset.append(make("div", { class: "field-error", role: "alert" }));
    const needed = new Set(schema.required || []);
    const children = Object.entries(schema.properties || {}).map(([name, child]) => {
      const built = editor(child, `${path}.${name}`, name, needed.has(name), widget && widget.fields && widget.fields[name]);
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
  const id = inputId(path);
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
  const field = labelled(id, label, input, help);
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

/**
 * The form of `outputSchema`; `read()` gives the output object. `widgets`
 * (a task's, by facet) pick the editors of the facets that name one.
 */
export function schemaForm(outputSchema, widgets = {}) {
  return editor(outputSchema, "$.output", "output", true, { kind: "generic", fields: widgets || {} });
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
