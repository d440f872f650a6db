package plan

import (
	"sort"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/archive"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/asset"
)

// Placeholders for values a plan must not or cannot show.
const (
	Secret  = "[secret]"
	Unknown = "[unknown]"
)

// inputs turns a property map into plain JSON values; never nil, so an input-less resource reads "inputs": {}.
func inputs(props resource.PropertyMap) map[string]any {
	out := make(map[string]any, len(props))
	for k, v := range props {
		out[string(k)] = value(v)
	}
	return out
}

func value(v resource.PropertyValue) any {
	switch {
	case v.IsSecret():
		return Secret
	case v.IsComputed():
		return Unknown
	case v.IsOutput():
		o := v.OutputValue()
		switch {
		case o.Secret:
			return Secret
		case !o.Known:
			return Unknown
		}
		return value(o.Element)
	case v.IsNull():
		return nil
	case v.IsBool():
		return v.BoolValue()
	case v.IsNumber():
		return v.NumberValue()
	case v.IsString():
		return v.StringValue()
	case v.IsArray():
		arr := v.ArrayValue()
		out := make([]any, len(arr))
		for i, item := range arr {
			out[i] = value(item)
		}
		return out
	case v.IsObject():
		return inputs(v.ObjectValue())
	case v.IsResourceReference():
		return map[string]any{"resource": string(v.ResourceReferenceValue().URN)}
	case v.IsAsset():
		return map[string]any{"asset": assetSource(v.AssetValue())}
	case v.IsArchive():
		return map[string]any{"archive": archiveSource(v.ArchiveValue())}
	}
	return Unknown
}

// assetSource names where an asset comes from; a text asset is shown whole, as it is the content itself.
func assetSource(a *asset.Asset) string {
	if src := location(a.Path, a.URI); src != "" {
		return src
	}
	return a.Text
}

// archiveSource names where an archive comes from, or lists its members when it is built from assets.
func archiveSource(a *archive.Archive) any {
	if src := location(a.Path, a.URI); src != "" {
		return src
	}
	names := make([]string, 0, len(a.Assets))
	for name := range a.Assets {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func location(path, uri string) string {
	if path != "" {
		return path
	}
	return uri
}
